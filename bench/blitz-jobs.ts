// /blitz jobs beside /blitz: one job of N prompts through the gateway under test, timed from the
// POST to the last item's end (polled with GET /blitz/jobs/{id}?limit=1 every 50 ms), with the
// gateway's CPU over that span. Two upstreams: 0 ms (what the queue, admission and the per-item
// writes cost: items/s and CPU per item) and the /blitz scenario's 300 ms (throughput against the
// concurrency bound BLITZ_JOB_CONCURRENCY / latency). "Overhead per item" is the time a worker
// slot spends on an item beyond its upstream wait: wall × concurrency / N − upstream latency.
import { cpuMicros } from "./lib/processes.ts";

export interface BlitzJobRow {
  upstreamMs: number;
  prompts: number;
  concurrency: number;
  wallMs: number;
  itemsPerS: number;
  /** Items per second the concurrency allows at this latency (∞ at 0 ms). */
  boundPerS: number;
  overheadMsPerItem: number;
  gatewayCpuUsPerItem: number;
  succeeded: number;
  errors: string[];
}

/** The gateway's default BLITZ_JOB_CONCURRENCY (the bench does not change it). */
export const JOB_CONCURRENCY = 16;

async function runJob(gatewayBase: string, routingKey: string, gatewayPid: number, prompts: number, upstreamMs: number): Promise<BlitzJobRow> {
  const headers = { authorization: `Bearer ${routingKey}`, "content-type": "application/json" };
  const items = Array.from({ length: prompts }, (_, i) => ({ messages: [{ role: "user", content: `Classify ticket #${i} by urgency.` }], mock: { latency_ms: upstreamMs } }));
  const body = JSON.stringify({ model: "gpt-4o-mini", max_tokens: 64, prompts: items });
  const errors: string[] = [];
  const cpu0 = cpuMicros(gatewayPid);
  const t0 = performance.now();
  const res = await fetch(`${gatewayBase}/blitz/jobs`, { method: "POST", headers, body });
  const job = (await res.json()) as { id?: string; error?: string };
  if (res.status !== 202 || !job.id) throw new Error(`POST /blitz/jobs answered ${res.status}: ${JSON.stringify(job).slice(0, 200)}`);
  type JobView = { status: string; progress: { remaining: number; succeeded: number } };
  let last = null as JobView | null;
  for (const end = Date.now() + 600_000; Date.now() < end;) {
    last = await (await fetch(`${gatewayBase}/blitz/jobs/${job.id}?limit=1`, { headers })).json() as JobView;
    if (last && last.progress.remaining === 0) break;
    await Bun.sleep(50);
  }
  const wallMs = performance.now() - t0;
  const cpuUs = cpuMicros(gatewayPid) - cpu0;
  if (!last || last.progress.remaining !== 0) errors.push(`job ${job.id} did not finish: ${JSON.stringify(last).slice(0, 200)}`);
  else if (last.progress.succeeded !== prompts) errors.push(`job ${job.id}: ${prompts - last.progress.succeeded} of ${prompts} prompts did not succeed (status ${last.status})`);
  return {
    upstreamMs, prompts, concurrency: JOB_CONCURRENCY, wallMs,
    itemsPerS: (prompts * 1000) / wallMs,
    boundPerS: upstreamMs > 0 ? (JOB_CONCURRENCY * 1000) / upstreamMs : Infinity,
    overheadMsPerItem: (wallMs * JOB_CONCURRENCY) / prompts - upstreamMs,
    gatewayCpuUsPerItem: cpuUs / prompts,
    succeeded: last?.progress.succeeded ?? 0,
    errors,
  };
}

/** Full runs: 1,000 prompts at 0 ms and at 300 ms. Smoke: 100 and 48, a few seconds. */
export async function measureBlitzJobs(gatewayBase: string, routingKey: string, gatewayPid: number, smoke: boolean, upstreamMs: number): Promise<BlitzJobRow[]> {
  // A warm-up job: first use of the queue, its scripts and the job tables.
  await runJob(gatewayBase, routingKey, gatewayPid, 16, 0);
  return [
    await runJob(gatewayBase, routingKey, gatewayPid, smoke ? 100 : 1000, 0),
    await runJob(gatewayBase, routingKey, gatewayPid, smoke ? 48 : 1000, upstreamMs),
  ];
}
