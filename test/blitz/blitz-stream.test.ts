// Streamed POST /blitz over real HTTP (CONTRACT §8): `item` events in finishing order, keep-alive
// comments while nothing finished, a `done` summary, admission errors still as JSON, and a client
// that disconnects cancels what has not started and is charged for what ran.
import { afterEach, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { storesLabel } from "../helpers/gateway.ts";
import { useBlitzWorld } from "../helpers/relay-world.ts";
import { Semaphore } from "../../src/blitz/pool.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const user = (content: string) => ({ messages: [{ role: "user", content }] });

type Frame = { comment: true } | { event: string; data: any };

/** Reads SSE frames from a response as they arrive. */
function frames(res: Response) {
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let buf = "";
  const queue: Frame[] = [];
  return {
    async next(): Promise<Frame | null> {
      for (;;) {
        const cut = buf.indexOf("\n\n");
        if (cut >= 0) {
          const raw = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          if (raw.startsWith(":")) return { comment: true };
          const event = /^event: (.*)$/m.exec(raw)?.[1] ?? "message";
          const data = JSON.parse(/^data: (.*)$/m.exec(raw)![1]!);
          return { event, data };
        }
        if (queue.length) return queue.shift()!;
        const r = await reader.read();
        if (r.done) return null;
        buf += dec.decode(r.value, { stream: true });
      }
    },
    cancel: () => reader.cancel(),
  };
}

describe(`POST /blitz streamed (${storesLabel})`, () => {
  const w = useBlitzWorld();
  afterEach(() => w.A.setDefault({}), 60_000);

  const post = (token: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    fetch(`${w.gw.url}/blitz`, {
      method: "POST", signal,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  const recordsOf = (keyId: string) => w.records(eq(usageRecords.routingKeyId, keyId));

  test("CONTRACT §8: one item event per prompt as it finishes (slow prompt last), keep-alive comments while none finished, then done", async () => {
    const key = await w.oneLane();
    const keepAlive = w.gw.ctx.config.KEEPALIVE_MS;
    (w.gw.ctx.config as { KEEPALIVE_MS: number }).KEEPALIVE_MS = 100;
    try {
      const prompts = [
        { ...user("slow"), mock: { latency_ms: 1500, content: "slow answer", prompt_tokens: 7, completion_tokens: 3 } },
        { ...user("fast a"), mock: { content: "fast a" } },
        { ...user("fast b"), mock: { content: "fast b" } },
      ];
      const res = await post(key.raw, { model: "gpt-4o-mini", stream: true, prompts });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toStartWith("text/event-stream");
      const f = frames(res);
      const first = await f.next();
      expect(first).toEqual({ comment: true }); // headers and a comment before any prompt finished
      const items: any[] = [];
      let commentsBeforeSlow = 0;
      let done: any = null;
      for (let fr = await f.next(); fr; fr = await f.next()) {
        if ("comment" in fr) {
          if (items.length === 2) commentsBeforeSlow++;
          continue;
        }
        if (fr.event === "item") items.push(fr.data);
        if (fr.event === "done") done = fr.data;
      }
      // The two fast prompts arrive before the slow one, whatever their order between themselves.
      expect(items.map((i) => i.index).slice(0, 2).sort()).toEqual([1, 2]);
      expect(items[2].index).toBe(0);
      expect(commentsBeforeSlow).toBeGreaterThanOrEqual(1);
      for (const it of items) {
        expect(it.status).toBe(200);
        expect(it.completion.object).toBe("chat.completion");
        expect(it.usage.total_tokens).toBe(it.usage.prompt_tokens + it.usage.completion_tokens);
      }
      expect(items[2].completion.choices[0].message.content).toBe("slow answer");
      expect(items[2].usage).toEqual({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
      const sum = items.reduce((a, i) => a + i.usage.total_tokens, 0);
      expect(done).toEqual({ object: "blitz.summary", prompts: 3, succeeded: 3, failed: 0, cancelled: 0, usage: expect.objectContaining({ total_tokens: sum }) });
    } finally {
      (w.gw.ctx.config as { KEEPALIVE_MS: number }).KEEPALIVE_MS = keepAlive;
    }
  });

  test("CONTRACT §8: Accept: text/event-stream streams too; a failing prompt is an error item and counts as failed", async () => {
    const key = await w.oneLane();
    const res = await post(key.raw, { model: "gpt-4o-mini", prompts: ["ok", { ...user("bad"), mock: { status: 503 } }] }, { accept: "text/event-stream" });
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    const f = frames(res);
    const items: any[] = [];
    let done: any = null;
    for (let fr = await f.next(); fr; fr = await f.next()) {
      if ("comment" in fr) continue;
      if (fr.event === "item") items.push(fr.data);
      else done = fr.data;
    }
    const bad = items.find((i) => i.index === 1);
    expect(bad).toEqual({ index: 1, status: 502, error: { message: expect.any(String), code: "upstream_error" }, usage: null });
    expect(done.succeeded).toBe(1);
    expect(done.failed).toBe(1);
  });

  test("CONTRACT §8: admission refusals stay JSON (402 before any event, nothing upstream)", async () => {
    const key = await w.oneLane({ monthlyBudgetUsd: 0.000001 });
    const a0 = w.A.received.length;
    const res = await post(key.raw, { model: "gpt-4o-mini", stream: true, max_tokens: 100000, prompts: ["a"] });
    expect(res.status).toBe(402);
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(((await res.json()) as { code: string }).code).toBe("budget_exceeded");
    expect(w.A.received.length).toBe(a0);
  });

  test("CONTRACT §8: a client that disconnects cancels the prompts not started and is charged for the one that ran", async () => {
    const key = await w.oneLane({ monthlyBudgetUsd: 5 });
    const original = w.gw.ctx.services.blitzSlots;
    const small = new Semaphore(2);
    w.gw.ctx.services.blitzSlots = small;
    try {
      const a0 = w.A.received.length;
      const aborted0 = w.A.aborted;
      const ac = new AbortController();
      // Two run at a time: the fast one finishes and frees its slot for a hanging one; two stay queued.
      const prompts = [
        { ...user("fast"), mock: { content: "done", prompt_tokens: 50, completion_tokens: 20 } },
        { ...user("h1"), mock: { hang: true } },
        { ...user("h2"), mock: { hang: true } },
        { ...user("h3"), mock: { hang: true } },
        { ...user("h4"), mock: { hang: true } },
      ];
      const res = await post(key.raw, { model: "gpt-4o-mini", stream: true, max_tokens: 100, prompts }, {}, ac.signal);
      const f = frames(res);
      let item: any = null;
      while (!item) {
        const fr = await f.next();
        if (fr && !("comment" in fr) && fr.event === "item") item = fr.data;
      }
      expect(item.index).toBe(0);
      for (let i = 0; i < 100 && w.A.received.length - a0 < 3; i++) await sleep(20);
      expect(w.A.received.length - a0).toBe(3);
      ac.abort();
      await f.cancel().catch(() => {});
      await w.A.waitForAborts(aborted0 + 2);
      for (let i = 0; i < 100 && (small.inUse > 0 || small.waiting > 0); i++) await sleep(20);
      expect(small.inUse).toBe(0);
      expect(small.waiting).toBe(0);
      await sleep(100);
      expect(w.A.received.length - a0).toBe(3); // the two queued never went upstream
      const rows = await recordsOf(key.id);
      expect(rows).toHaveLength(3);
      const ok = rows.filter((r) => r.outcome === "ok");
      expect(ok).toHaveLength(1);
      expect(ok[0]!.costUsd).toBeGreaterThan(0);
      expect(rows.filter((r) => r.outcome === "aborted")).toHaveLength(2);
      // The key's spend is what ran: the recorded costs, nothing of the cancelled reservation.
      await (w.gw.ctx.services.settleBatcher as { flush(): Promise<void> }).flush();
      const recorded = rows.reduce((a, r) => a + r.costUsd, 0);
      let spend = -1;
      for (let i = 0; i < 50; i++) {
        spend = (await w.gw.call("/v1/key", { token: key.raw })).body.budget.current_month_spend_usd;
        if (Math.abs(spend - recorded) <= 1e-6) break;
        await sleep(20);
      }
      expect(Math.abs(spend - recorded)).toBeLessThanOrEqual(1e-6);
    } finally {
      w.gw.ctx.services.blitzSlots = original;
    }
  });
});
