// The webhook sender's poll (src/webhooks/sender.ts) is only for retries coming due and deliveries
// whose sender died: with the default retry base it runs every 5 s, so an event must reach its
// receiver through the nudge of the instance that queued it, not through the poll. Both store modes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { storesLabel } from "../helpers/gateway.ts";
import { addRoutingKey, lane, startRelayWorld, type RelayWorld } from "../helpers/relay-world.ts";
import { until } from "../helpers/until.ts";
import { jobWhenEnded } from "../helpers/blitz-jobs.ts";
import { pollMs } from "../../src/webhooks/sender.ts";
import { startReceiver, type Receiver } from "./receiver.ts";

describe(`webhook poll (${storesLabel}, default retry base)`, () => {
  let w: RelayWorld<"openai">;
  let rx: Receiver;
  let key: { raw: string };

  beforeAll(async () => {
    rx = startReceiver();
    w = await startRelayWorld({ providers: ["openai"] });
    key = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("openai", w.cred.openai.id)] });
  }, 60_000);
  afterAll(async () => {
    await w?.stop();
    await rx?.stop();
  }, 60_000);

  /** The first delivery about `jobId`, or null when none came within `ms`. */
  const firstEvent = (jobId: string, ms: number) =>
    until("a delivery", async () => rx.got.find((x) => JSON.parse(x.body).data?.job?.id === jobId) ?? null, ms, 20).catch(() => null);

  test("the poll runs every half of the first retry's delay, between 1 and 5 s (10 s by default: 5 s)", () => {
    expect(pollMs(10)).toBe(5000);
    expect(pollMs(4)).toBe(2000);
    expect(pollMs(0.2)).toBe(1000);
    expect(pollMs(3600)).toBe(5000);
  });

  test("CONTRACT §8: DELETE of a job with webhook_url sends job.cancelled at once, not at the next poll", async () => {
    const prompts = Array.from({ length: 20 }, (_, i) => ({ messages: [{ role: "user", content: `poll ${i}` }], mock: { latency_ms: 300 } }));
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts, webhook_url: rx.url } });
    expect(r.status).toBe(202);
    // Past the sender's first poll after boot, so the next one is seconds away.
    await Bun.sleep(200);
    const at = Date.now();
    const del = await w.gw.call(`/blitz/jobs/${r.body.id}`, { token: key.raw, method: "DELETE" });
    expect(del.body.status).toBe("cancelled");
    const d = await firstEvent(r.body.id, 4000);
    expect(d).not.toBeNull();
    expect(JSON.parse(d!.body).type).toBe("job.cancelled");
    expect(d!.at - at).toBeLessThan(1500);
  }, 30_000);

  test("CONTRACT §8: a job's end sends job.completed at once, not at the next poll", async () => {
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts: ["one", "two"], webhook_url: rx.url } });
    expect(r.status).toBe(202);
    expect((await jobWhenEnded(w.gw, key.raw, r.body.id, 20_000)).status).toBe("completed");
    const ended = Date.now();
    const d = await firstEvent(r.body.id, 4000);
    expect(d).not.toBeNull();
    expect(JSON.parse(d!.body).type).toBe("job.completed");
    expect(d!.at - ended).toBeLessThan(1500);
  }, 30_000);
});
