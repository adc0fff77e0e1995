// One account's slow webhook receiver must not hold another account's events (src/webhooks/sender.ts):
// the sender runs at most PER_ACCOUNT_IN_FLIGHT deliveries of one account at a time, hands each
// free place to the account whose oldest due delivery has waited its turn (outbox.ts claimDue), and
// gives an attempt ATTEMPT_TIMEOUT_MS. Both store modes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { createAccount, storesLabel } from "../helpers/gateway.ts";
import { addRoutingKey, lane, startRelayWorld, type RelayWorld } from "../helpers/relay-world.ts";
import { until } from "../helpers/until.ts";
import { jobWhenEnded } from "../helpers/blitz-jobs.ts";
import { claimDue, enqueueEvent } from "../../src/webhooks/outbox.ts";
import { ATTEMPT_TIMEOUT_MS, PER_ACCOUNT_IN_FLIGHT } from "../../src/webhooks/sender.ts";
import { webhookDeliveries } from "../../src/store/db/schema/index.ts";
import { startReceiver, type Receiver } from "./receiver.ts";

/** A receiver that accepts every delivery and never answers (until stopped). */
function startHangingReceiver() {
  let arrived = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    fetch: () => {
      arrived++;
      return new Promise<Response>(() => {});
    },
  });
  return { url: `http://127.0.0.1:${server.port}/hang`, arrived: () => arrived, stop: () => server.stop(true) };
}

describe(`webhook fairness across accounts (${storesLabel})`, () => {
  let w: RelayWorld<"openai">;
  let rx: Receiver;
  let hang: ReturnType<typeof startHangingReceiver>;
  let key: { raw: string };

  beforeAll(async () => {
    rx = startReceiver();
    hang = startHangingReceiver();
    w = await startRelayWorld({ providers: ["openai"] });
    key = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("openai", w.cred.openai.id)] });
  }, 60_000);
  afterAll(async () => {
    await w?.stop();
    await rx?.stop();
    await hang?.stop();
  }, 60_000);

  test("CONTRACT §8 webhooks: an attempt waits at most 5 s for its receiver", () => {
    expect(ATTEMPT_TIMEOUT_MS).toBe(5_000);
  });

  test("CONTRACT §8 webhooks: a claim takes each account's oldest due first, round by round, and at most its share", async () => {
    const db = w.gw.ctx.db;
    const sender = w.gw.ctx.services.webhooks;
    const a = await createAccount(w.gw);
    const b = await createAccount(w.gw);
    const far = "http://127.0.0.1:9/never";
    const ev = { type: "job.completed", data: { job: { id: "fair" } } };
    // This gateway's own sender is stopped meanwhile, so the rows are this claim's alone.
    await sender.stop();
    try {
      const ids = [
        ...(await enqueueEvent(db, a.id, ev, Array.from({ length: 10 }, () => ({ channel: "webhook" as const, target: far })))),
        ...(await enqueueEvent(db, b.id, ev, [{ channel: "webhook", target: far }])),
      ];
      // a already runs all but one of its share here: one more of a at most, and b's in the first round.
      const got = await claimDue(db, 3, PER_ACCOUNT_IN_FLIGHT, new Map([[a.id, PER_ACCOUNT_IN_FLIGHT - 1]]));
      const mine = got.filter((r) => ids.includes(r.id));
      expect(mine.filter((r) => r.accountId === b.id).length).toBe(1);
      expect(mine.filter((r) => r.accountId === a.id).length).toBe(1);
      // Claimed rows are leased: a second claim takes none of them again.
      const again = await claimDue(db, 20, 20);
      expect(again.filter((r) => mine.some((m) => m.id === r.id))).toEqual([]);
      // Given up, so the sender sends nothing to `far` once it runs again.
      for (const id of ids) await db.update(webhookDeliveries).set({ status: "failed", leaseUntil: null }).where(eq(webhookDeliveries.id, id));
    } finally {
      sender.start();
    }
  });

  test("CONTRACT §8 webhooks: 100 hanging deliveries of one account leave another account's job.completed within 2 s of on time", async () => {
    const noisy = await createAccount(w.gw);
    const ev = { type: "job.completed", data: { job: { id: "noisy" } } };
    await enqueueEvent(w.gw.ctx.db, noisy.id, ev, Array.from({ length: 100 }, () => ({ channel: "webhook" as const, target: hang.url })));
    w.gw.ctx.services.webhooks.nudge();
    await until("the noisy account's receiver holding the sender's attempts", async () => (hang.arrived() >= 1 ? true : null), 10_000);
    // Its share of the sender's places, no more, while they hang.
    await Bun.sleep(500);
    expect(hang.arrived()).toBe(PER_ACCOUNT_IN_FLIGHT);
    // The other account's job ends while the noisy account's deliveries hang (and keep coming).
    const r = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", prompts: ["one", "two"], webhook_url: rx.url } });
    expect(r.status).toBe(202);
    expect((await jobWhenEnded(w.gw, key.raw, r.body.id, 20_000)).status).toBe("completed");
    const ended = Date.now();
    const d = await until("the job's delivery", async () => rx.got.find((x) => JSON.parse(x.body).data?.job?.id === r.body.id) ?? null, 20_000, 20).catch(() => null);
    expect(d).not.toBeNull();
    expect(JSON.parse(d!.body).type).toBe("job.completed");
    expect(d!.at - ended).toBeLessThan(2000);
  }, 60_000);
});
