// A month counter rebuilt from Postgres (CONTRACT §7: first use of the month, or Redis lost its
// state) must not already hold the records of the settlements that will add their cost to it:
// the rebuild can leave out given money calls (record keys are `<call uid>.<attempt>`).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { monthKey } from "../../src/lib/time.ts";
import { addingKey, counterKey, inflightKey, monthSpendUsd, recordedSpendUsd, seed, toNano } from "../../src/money/counters.ts";
import type { Cmds } from "../../src/store/kv/redis.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, REAL_STORES, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { addRoutingKey } from "./fixtures.ts";

describe(`counter rebuild (${storesLabel})`, () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway(); }, 30_000);
  afterAll(() => gw?.stop(), 60_000);

  test("the rebuild leaves out the records of the calls whose settlements are about to add them", async () => {
    const acct = await createAccount(gw);
    const k = await addRoutingKey(gw, acct.id, { lanes: [] });
    const row = (recordKey: string | null, costUsd: number) => ({ accountId: acct.id, routingKeyId: k.id, endpoint: "chat", provider: "openai", status: 200, outcome: "ok", costUsd, recordKey, seat: false });
    await gw.ctx.db.insert(usageRecords).values([row("inst-1.a.1", 1), row("inst-1.a.2", 2), row("inst-1.b.1", 4), row(null, 8), row("inst-2.a.1", 16)]);
    const key = { id: k.id, monthlyBudgetUsd: null, budgetExcludesSeats: true };
    expect(await recordedSpendUsd(gw.ctx, key, monthKey())).toBe(31);
    expect(await recordedSpendUsd(gw.ctx, key, monthKey(), ["inst-1.a"])).toBe(28);
    expect(await recordedSpendUsd(gw.ctx, key, monthKey(), ["inst-1.a", "inst-1.b", "nope"])).toBe(24);
  });

  // The adding set (CONTRACT §7 budget: the counter a budget is checked against counts each
  // settled call once): calls whose records may be in Postgres while their cost is still to be
  // added on top of the counter. Every rebuild leaves them out, on whichever instance it runs.
  test("CONTRACT §7 budget: a rebuild leaves out the calls of the month's adding set, adds the reservations of those still in flight, and sets the counter only while the set is what it read", async () => {
    const acct = await createAccount(gw);
    const k = await addRoutingKey(gw, acct.id, { lanes: [] });
    const row = (recordKey: string, costUsd: number) => ({ accountId: acct.id, routingKeyId: k.id, endpoint: "chat", provider: "openai", status: 200, outcome: "ok", costUsd, recordKey, seat: false });
    await gw.ctx.db.insert(usageRecords).values([row("inst-1.a.1", 1), row("inst-1.b.1", 2), row("inst-1.c.1", 4)]);
    const key = { id: k.id, monthlyBudgetUsd: 100, budgetExcludesSeats: true };
    const month = monthKey();
    const counter = counterKey(k.id, month);
    const adding = addingKey(k.id, month);
    // The set as read is not what it is now: nothing is set, the caller reads and sums again.
    expect(await gw.ctx.kv.seedExcept(counter, adding, inflightKey(k.id), 1, 60, ["inst-1.a"])).toBe(false);
    expect(await gw.ctx.kv.getNumber(counter)).toBeNull();
    if (REAL_STORES) {
      // Another instance's settlement found the counter missing (its call goes in the set), and a
      // call put back after a restart is still in flight, holding 0.5 reserved.
      const r = (gw.ctx.kv as unknown as { client: Cmds }).client;
      await r.sadd(adding, "inst-1.a", "inst-1.b");
      await r.hset(inflightKey(k.id), "inst-1.b", `{}|${toNano(0.5)}`);
      await seed(gw.ctx, key, month);
      expect(await gw.ctx.kv.getNumber(counter)).toBe(toNano(4 + 0.5));
      // The settlement that put inst-1.a in the set adds its cost once and takes it out.
      expect(await r.gwAddRebuilt(counter, adding, 60, `inst-1.a\t${toNano(1)}\n`)).toBe(toNano(1));
      expect(await r.gwAddRebuilt(counter, adding, 60, `inst-1.a\t${toNano(1)}\n`)).toBe(0);
      expect(await r.smembers(adding)).toEqual(["inst-1.b"]);
      expect(await gw.ctx.kv.getNumber(counter)).toBe(toNano(5.5));
    } else {
      // In process nothing is in flight elsewhere: the rebuild is the records' sum.
      await seed(gw.ctx, key, month);
      expect(await gw.ctx.kv.getNumber(counter)).toBe(toNano(7));
    }
  });

  test("CONTRACT §7 budget: a reader that finds the counter missing answers the records' sum and leaves the rebuild to the money path", async () => {
    const acct = await createAccount(gw);
    const k = await addRoutingKey(gw, acct.id, { lanes: [] });
    await gw.ctx.db.insert(usageRecords).values([{ accountId: acct.id, routingKeyId: k.id, endpoint: "chat", provider: "openai", status: 200, outcome: "ok", costUsd: 2.5, recordKey: "inst-9.a.1", seat: false }]);
    const key = { id: k.id, monthlyBudgetUsd: 100, budgetExcludesSeats: true };
    expect((await monthSpendUsd(gw.ctx, key)).usd).toBe(2.5);
    expect(await gw.ctx.kv.getNumber(counterKey(k.id, monthKey()))).toBeNull();
  });
});
