// A month counter rebuilt from Postgres (CONTRACT §7: first use of the month, or Redis lost its
// state) must not already hold the records of the settlements that will add their cost to it:
// the rebuild can leave out given money calls (record keys are `<call uid>.<attempt>`).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { monthKey } from "../../src/lib/time.ts";
import { recordedSpendUsd } from "../../src/relay/budget/counters.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
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
});
