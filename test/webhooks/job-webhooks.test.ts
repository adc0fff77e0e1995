// Signed webhooks (CONTRACT §8): the account's secret (GET creates, POST rotates, sk_ only,
// sealed at rest), a job's end POSTed to its webhook_url with Gateway-Signature (verified by an
// independent check on a real receiver on loopback), retries with backoff until a 2xx and never
// after it, and the SSRF guard again at delivery. Both store modes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { addToken, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, lane } from "../relay/fixtures.ts";
import { createAccount } from "../helpers/gateway.ts";
import { webhookDeliveries, webhookSecrets } from "../../src/store/db/schema/index.ts";
import { enqueueEvent, KEEP_FINISHED_MS, pruneFinished } from "../../src/webhooks/outbox.ts";
import { independentlyVerified, startReceiver, type Receiver } from "./receiver.ts";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until<T>(what: string, f: () => T | Promise<T>, ms = 30_000): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe(`job webhooks (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream;
  let rx: Receiver;
  let acct: { id: string; token: string };
  let key: { raw: string };

  beforeAll(async () => {
    A = await startMockOpenAI();
    rx = startReceiver();
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: A.url, WEBHOOK_RETRY_BASE_SECONDS: "0.2" });
    acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await A?.stop();
    await rx?.stop();
  }, 60_000);

  const secretOf = async () => (await gw.call("/v1/organizations/webhook-secret", { token: acct.token })).body.secret as string;
  const eventsOf = (jobId: string) => rx.got.filter((d) => JSON.parse(d.body).data?.job?.id === jobId);

  test("CONTRACT §8: GET /v1/organizations/webhook-secret creates the secret once and shows it to sk_ only; POST rotates; sealed at rest, never logged", async () => {
    const ro = await addToken(gw, acct.id, "read_only");
    const denied = await gw.call("/v1/organizations/webhook-secret", { token: ro });
    expect([denied.status, denied.body.code]).toEqual([403, "read_only_token"]);
    expect((await gw.call("/v1/organizations/webhook-secret", { token: ro, method: "POST" })).status).toBe(403);
    expect((await gw.call("/v1/organizations/webhook-secret", { token: null })).status).toBe(401);
    const first = await gw.call("/v1/organizations/webhook-secret", { token: acct.token });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ secret: expect.stringMatching(/^whsec_[A-Za-z0-9]{40}$/) });
    expect(await secretOf()).toBe(first.body.secret);
    const rotated = await gw.call("/v1/organizations/webhook-secret", { token: acct.token, method: "POST" });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(first.body.secret);
    expect(await secretOf()).toBe(rotated.body.secret);
    const [row] = await gw.ctx.db.select().from(webhookSecrets).where(eq(webhookSecrets.accountId, acct.id));
    expect(row!.secretCiphertext).not.toContain(rotated.body.secret.slice(6));
    expect(gw.ctx.secrets.open(row!.secretCiphertext, `webhook_secrets:${acct.id}`)).toBe(rotated.body.secret);
    const logs = gw.logs.join("");
    for (const s of [first.body.secret, rotated.body.secret]) expect(logs).not.toContain(s);
    expect((await gw.call("/v1/organizations/webhook-secret", { token: acct.token, method: "DELETE" })).status).toBe(405);
  });

  test("CONTRACT §8: a job with webhook_url POSTs job.completed once, with a Gateway-Signature an independent HMAC check verifies", async () => {
    const secret = await secretOf();
    const r = await gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts: ["a", "b", "c"], webhook_url: rx.url } });
    expect(r.status).toBe(202);
    expect(r.body.webhook_url).toBe(rx.url);
    const [d] = await until("job.completed delivery", () => (eventsOf(r.body.id).length ? eventsOf(r.body.id) : null));
    const ev = JSON.parse(d!.body);
    const evId = String(ev.id);
    expect(ev).toMatchObject({ id: expect.stringMatching(/^evt_/), object: "event", type: "job.completed", created: expect.any(Number) });
    expect(ev.data.job).toMatchObject({ id: r.body.id, object: "blitz.job", status: "completed", total: 3, progress: { done: 3, remaining: 0, succeeded: 3 } });
    expect(d!.headers.get("content-type")).toBe("application/json");
    expect(d!.headers.get("gateway-event-id")).toBe(evId);
    const sig = d!.headers.get("gateway-signature");
    expect(sig).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(await independentlyVerified(secret, d!.body, sig)).toBe(true);
    // Any other secret, or a body changed by one byte, fails the same check.
    expect(await independentlyVerified("whsec_other", d!.body, sig)).toBe(false);
    expect(await independentlyVerified(secret, d!.body.replace("completed", "complete "), sig)).toBe(false);
    // Delivered: recorded as such, and not sent again.
    await gw.ctx.services.webhooks.runOnce();
    await sleep(1500);
    expect(eventsOf(r.body.id)).toHaveLength(1);
    const [row] = await gw.ctx.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.id, evId));
    expect([row!.status, row!.attempts]).toEqual(["delivered", 1]);
  }, 60_000);

  test("CONTRACT §8: a receiver that fails gets the delivery again with backoff; once it answered 2xx it is never sent again; a job with no success is job.failed", async () => {
    const secret = await secretOf();
    rx.failNext(500, 503);
    const r = await gw.call("/blitz/jobs", {
      token: key.raw,
      body: { model: "gpt-4o-mini", prompts: [{ messages: [{ role: "user", content: "x" }], mock: { status: 400 } }], webhook_url: rx.url },
    });
    expect(r.status).toBe(202);
    const got = await until("third attempt", () => (eventsOf(r.body.id).length >= 3 ? eventsOf(r.body.id) : null));
    const ids = new Set(got.map((d) => JSON.parse(d.body).id));
    expect(ids.size).toBe(1); // one event, three attempts
    expect(JSON.parse(got[0]!.body).type).toBe("job.failed");
    expect(JSON.parse(got[0]!.body).data.job).toMatchObject({ status: "failed", progress: { failed: 1, succeeded: 0 } });
    for (const d of got) expect(await independentlyVerified(secret, d.body, d.headers.get("gateway-signature"))).toBe(true);
    // Backoff: the second wait is longer than a poll, the attempts are apart.
    expect(got[1]!.at).toBeGreaterThan(got[0]!.at);
    await sleep(2000);
    await gw.ctx.services.webhooks.runOnce();
    expect(eventsOf(r.body.id)).toHaveLength(3);
    const [row] = await gw.ctx.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.id, [...ids][0]!));
    expect([row!.status, row!.attempts, row!.lastError]).toEqual(["delivered", 3, null]);
  }, 60_000);

  test("CONTRACT §8: DELETE ends a job with webhook_url as job.cancelled, sent once, signed, with the progress at the cancel", async () => {
    const secret = await secretOf();
    const prompts = Array.from({ length: 40 }, (_, i) => ({ messages: [{ role: "user", content: `cx ${i}` }], mock: { latency_ms: 200 } }));
    const r = await gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts, webhook_url: rx.url } });
    expect(r.status).toBe(202);
    const del = await gw.call(`/blitz/jobs/${r.body.id}`, { token: key.raw, method: "DELETE" });
    expect(del.body.status).toBe("cancelled");
    const [d] = await until("job.cancelled delivery", () => (eventsOf(r.body.id).length ? eventsOf(r.body.id) : null));
    const ev = JSON.parse(d!.body);
    expect(ev.type).toBe("job.cancelled");
    expect(ev.data.job).toMatchObject({ id: r.body.id, status: "cancelled", total: 40 });
    expect(ev.data.job.progress.not_run).toBeGreaterThan(0);
    expect(await independentlyVerified(secret, d!.body, d!.headers.get("gateway-signature"))).toBe(true);
    // The running prompts finishing afterwards do not end the job a second time.
    await sleep(1500);
    await gw.ctx.services.webhooks.runOnce();
    expect(eventsOf(r.body.id)).toHaveLength(1);
    // A second DELETE changes nothing and sends nothing.
    await gw.call(`/blitz/jobs/${r.body.id}`, { token: key.raw, method: "DELETE" });
    await gw.ctx.services.webhooks.runOnce();
    expect(eventsOf(r.body.id)).toHaveLength(1);
  }, 60_000);

  test("CONTRACT §2/§8: the SSRF guard applies again at delivery: a URL that now resolves to a private address is not called unless the operator allows it", async () => {
    const cfg = gw.ctx.config as { ALLOW_PRIVATE_UPSTREAMS: boolean };
    const before = rx.got.length;
    cfg.ALLOW_PRIVATE_UPSTREAMS = false;
    let id: string;
    try {
      [id] = (await enqueueEvent(gw.ctx.db, acct.id, { type: "job.completed", data: { job: { id: "bjob_ssrf" } } }, [{ channel: "webhook", target: rx.url }])) as [string];
      await gw.ctx.services.webhooks.runOnce();
      const row = await until("a failed attempt", async () => {
        const [x] = await gw.ctx.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.id, id));
        return x && x.attempts >= 1 && x.lastError ? x : null;
      });
      expect(row.status).toBe("pending");
      expect(row.lastError).toContain("loopback");
      expect(rx.got.length).toBe(before);
    } finally {
      cfg.ALLOW_PRIVATE_UPSTREAMS = true;
    }
    // Allowed again: the retry goes through.
    await until("delivery once allowed", () => rx.got.find((d) => JSON.parse(d.body).id === id), 30_000);
  }, 60_000);

  test("delivered and given-up events are deleted after KEEP_FINISHED_MS; a pending one stays whatever its age", async () => {
    const old = new Date(Date.now() - KEEP_FINISHED_MS - 60_000);
    const ids = await enqueueEvent(gw.ctx.db, acct.id, { type: "job.completed", data: {} }, [
      { channel: "webhook", target: "https://a.example.com/" }, { channel: "webhook", target: "https://b.example.com/" },
      { channel: "webhook", target: "https://c.example.com/" }, { channel: "webhook", target: "https://d.example.com/" },
    ]);
    const [delivered, failed, pending, recent] = ids as [string, string, string, string];
    const far = new Date(Date.now() + 3600_000); // not due: the sender leaves them alone meanwhile
    for (const [id, status, createdAt] of [[delivered, "delivered", old], [failed, "failed", old], [pending, "pending", old], [recent, "delivered", new Date()]] as const) {
      await gw.ctx.db.update(webhookDeliveries).set({ status, createdAt, nextAttemptAt: far }).where(eq(webhookDeliveries.id, id));
    }
    expect(await pruneFinished(gw.ctx.db)).toBeGreaterThanOrEqual(2);
    const left = new Set((await gw.ctx.db.select({ id: webhookDeliveries.id }).from(webhookDeliveries)).map((r) => r.id));
    expect([left.has(delivered), left.has(failed), left.has(pending), left.has(recent)]).toEqual([false, false, true, true]);
  });
});
