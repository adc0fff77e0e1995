// The webhook sender's poll (src/webhooks/sender.ts) is only for retries coming due and deliveries
// whose sender died: with the default retry base it runs every 5 s, so an event must reach its
// receiver through the nudge of the instance that queued it, not through the poll. Both store modes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, lane } from "../relay/fixtures.ts";
import { pollMs } from "../../src/webhooks/sender.ts";
import { startReceiver, type Receiver } from "./receiver.ts";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe(`webhook poll (${storesLabel}, default retry base)`, () => {
  let gw: TestGateway;
  let A: MockUpstream;
  let rx: Receiver;
  let key: { raw: string };

  beforeAll(async () => {
    A = await startMockOpenAI();
    rx = startReceiver();
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: A.url });
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await A?.stop();
    await rx?.stop();
  }, 60_000);

  const firstEvent = async (jobId: string, ms: number) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      const d = rx.got.find((x) => JSON.parse(x.body).data?.job?.id === jobId);
      if (d) return d;
      await sleep(20);
    }
    return null;
  };

  test("the poll runs every half of the first retry's delay, between 1 and 5 s (10 s by default: 5 s)", () => {
    expect(pollMs(10)).toBe(5000);
    expect(pollMs(4)).toBe(2000);
    expect(pollMs(0.2)).toBe(1000);
    expect(pollMs(3600)).toBe(5000);
  });

  test("CONTRACT §8: DELETE of a job with webhook_url sends job.cancelled at once, not at the next poll", async () => {
    const prompts = Array.from({ length: 20 }, (_, i) => ({ messages: [{ role: "user", content: `poll ${i}` }], mock: { latency_ms: 300 } }));
    const r = await gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts, webhook_url: rx.url } });
    expect(r.status).toBe(202);
    // Past the sender's first poll after boot, so the next one is seconds away.
    await sleep(200);
    const at = Date.now();
    const del = await gw.call(`/blitz/jobs/${r.body.id}`, { token: key.raw, method: "DELETE" });
    expect(del.body.status).toBe("cancelled");
    const d = await firstEvent(r.body.id, 4000);
    expect(d).not.toBeNull();
    expect(JSON.parse(d!.body).type).toBe("job.cancelled");
    expect(d!.at - at).toBeLessThan(1500);
  }, 30_000);

  test("CONTRACT §8: a job's end sends job.completed at once, not at the next poll", async () => {
    const r = await gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts: ["one", "two"], webhook_url: rx.url } });
    expect(r.status).toBe(202);
    let ended = 0;
    const end = Date.now() + 20_000;
    while (Date.now() < end) {
      const j = await gw.call(`/blitz/jobs/${r.body.id}`, { token: key.raw });
      if (j.body.status === "completed") { ended = Date.now(); break; }
      await sleep(20);
    }
    expect(ended).toBeGreaterThan(0);
    const d = await firstEvent(r.body.id, 4000);
    expect(d).not.toBeNull();
    expect(JSON.parse(d!.body).type).toBe("job.completed");
    expect(d!.at - ended).toBeLessThan(1500);
  }, 30_000);
});
