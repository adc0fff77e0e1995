// Watching a /blitz job from a test: which prompts reached the mock upstream, and the job's view
// once nothing of it remains.
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import type { TestGateway } from "./gateway.ts";

/** How many times each prompt whose text is `<tag> p<index>.` reached the upstream, by index. */
export function promptsSent(mock: MockUpstream, tag: string): Map<number, number> {
  const re = new RegExp(`${tag} p(\\d+)\\.`);
  const sent = new Map<number, number>();
  for (const r of mock.received) {
    const m = re.exec(JSON.stringify(r.body?.messages ?? ""));
    if (m) sent.set(Number(m[1]), (sent.get(Number(m[1])) ?? 0) + 1);
  }
  return sent;
}

/** GET /blitz/jobs/{id} until no item remains, or `ms` passed: the job as last seen. */
export async function jobWhenEnded(gw: TestGateway, token: string, id: string, ms = 60_000): Promise<any> {
  let job: any;
  for (const until = Date.now() + ms; Date.now() < until; await Bun.sleep(100)) {
    job = (await gw.call(`/blitz/jobs/${id}?limit=1`, { token })).body;
    if (job.progress?.remaining === 0) break;
  }
  return job;
}

/** Every result of a job, page after page (GET /blitz/jobs/{id}?after=…&limit=1000). */
export async function jobResults(gw: TestGateway, token: string, id: string): Promise<any[]> {
  const out: any[] = [];
  for (let after: number | null = -1; after !== null;) {
    const p = await gw.call(`/blitz/jobs/${id}?after=${after}&limit=1000`, { token });
    out.push(...p.body.results);
    after = p.body.next_after;
  }
  return out;
}
