// The money of an upstream call (money/money.ts) on its own, without a gateway: MoneyCall
// gets only its MoneyDeps, here the in-process KV, a migrated PGlite database, the real settle
// batcher and rate limits, and sinks that keep the usage records and refusals it hands over.
// Checks CONTRACT §7 (accounting): reserve → record → settle arithmetic and admission decisions.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GatewayError } from "../../src/errors.ts";
import { createLogger } from "../../src/logger.ts";
import type { Usage } from "../../src/protocols/types.ts";
import { getAdapter } from "../../src/providers/registry.ts";
import type { ResolvedLane } from "../../src/providers/types.ts";
import { usageSoFar, type RelayRequest } from "../../src/relay/attempt.ts";
import { counterKey, monthSpendUsd, toNano } from "../../src/money/counters.ts";
import { estimateRequest } from "../../src/money/estimate.ts";
import { MoneyCall, type AttemptRecord, type MoneyDeps } from "../../src/money/money.ts";
import { createSettleBatcher, type SettleBatcher } from "../../src/money/settle-batch.ts";
import type { KeyContext } from "../../src/relay/key-context.ts";
import { RateLimits } from "../../src/relay/limits/rate-limits.ts";
import { priceUsd } from "../../src/money/pricing.ts";
import type { UsageRow } from "../../src/relay/usage-queue.ts";
import { monthKey } from "../../src/lib/time.ts";
import { openDb, type DbHandle } from "../../src/store/db/client.ts";
import { MemoryKV } from "../../src/store/kv/memory.ts";
import { seedPgliteDataDir } from "../helpers/template-db.ts";
import { RequestTracker } from "../../src/http/access-log.ts";

const MODEL = "gpt-4o-mini";
const openai = getAdapter("openai")!;

const lane: ResolvedLane = {
  provider: "openai", model: MODEL, credential_id: "cred_test", sub_session_id: null, bridge_instance_id: null,
  category_key: null, category_description: null, fallback_to_default_model: true, reasoning_effort: null,
  verbosity: null, service_tier: null, index: 0, credential: { id: "cred_test", apiKeyCiphertext: "" }, bridge: null, subSession: null,
};

let keys = 0;
function keyWith(monthlyBudgetUsd: number | null): KeyContext {
  const id = `rkey_money_${++keys}_${Date.now().toString(36)}`;
  return {
    id, accountId: "acct_money", label: "money", keyPrefix: "gw_money", hash: id, mode: "fallback",
    classifierProvider: null, classifierModel: null, classifierInstructions: null, classifierCredentialId: null, classifierCredential: null,
    monthlyBudgetUsd, budgetExcludesSeats: true, limits: null, cache: null, lanes: [lane], affinityTtlSeconds: null, accountExpiresAtMs: null,
  };
}

const request = (maxTokens: number) => ({ model: MODEL, messages: [{ role: "user", content: "How many moons has Mars?" }], max_tokens: maxTokens });
const usage = (prompt: number, completion: number): Usage => ({ prompt_tokens: prompt, completion_tokens: completion, cached_tokens: 0, cache_write_tokens: 0 });
const attempt = (u: Usage | null, outcome: AttemptRecord["outcome"] = "ok", status = 200, errorCode: string | null = null): AttemptRecord => ({
  adapter: openai, provider: "openai", laneIndex: 0, model: MODEL, status, outcome, errorCode, usage: u, latencyMs: 5, ttfbMs: 2,
});

describe("MoneyCall without a gateway (in-process KV, PGlite)", () => {
  let dir: string;
  let dbh: DbHandle;
  let kv: MemoryKV;
  let batcher: SettleBatcher;
  let deps: MoneyDeps;
  const rows: UsageRow[] = [];
  const refusals: Array<{ keyId: string | null; kind: string }> = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "gw-money-"));
    await seedPgliteDataDir(dir);
    dbh = await openDb({ dataDir: dir });
    kv = new MemoryKV();
    const log = createLogger("silent");
    const stores = { db: dbh.db, kv, log };
    batcher = createSettleBatcher(stores);
    deps = {
      db: dbh.db, kv, log, instanceId: "test-instance",
      config: { UNKNOWN_MODEL_PRICE_USD_PER_MTOK_INPUT: 10, UNKNOWN_MODEL_PRICE_USD_PER_MTOK_OUTPUT: 30 },
      services: {
        ledger: null, leases: null, settleBatcher: batcher,
        usageQueue: { push: (row) => void rows.push(row), refusal: (_account, keyId, kind) => void refusals.push({ keyId, kind }) },
        rateLimits: new RateLimits(stores, () => 1),
      },
    };
  }, 60_000);
  afterAll(async () => {
    await batcher?.flush();
    await kv?.close();
    await dbh?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);
  beforeEach(() => {
    rows.length = 0;
    refusals.length = 0;
  }, 10_000);

  /** The key's month counter in nano-dollars (reservations in flight included). */
  const counter = async (key: KeyContext) => {
    await batcher.flush();
    return (await kv.getNumber(counterKey(key.id, monthKey()))) ?? 0;
  };

  test("CONTRACT §7 budget: the worst case is reserved before forwarding, and settles to the real cost (the over-reservation refunded)", async () => {
    const key = keyWith(1);
    const body = request(500);
    const est = estimateRequest(deps, key, body, 200)!;
    const call = await MoneyCall.open(deps, key, { requestId: "req-1", endpoint: "chat" }, body, 200);
    expect(call.outputLimit).toBeNull();
    expect(await counter(key)).toBe(toNano(est.usd));

    const u = usage(40, 12);
    const cost = call.record(attempt(u));
    expect(cost).toBe(priceUsd("openai", MODEL, u, null).usd);
    expect(cost).toBeGreaterThan(0);
    expect(cost).toBeLessThan(est.usd);
    call.settle();
    expect(await counter(key)).toBe(toNano(cost));
    expect((await monthSpendUsd(deps, key)).usd).toBeCloseTo(cost, 9);
  });

  test("CONTRACT §7: every attempt, failed or served, is one usage record, and the settlement counts their sum", async () => {
    const key = keyWith(1);
    const call = await MoneyCall.open(deps, key, { requestId: "req-2", endpoint: "chat" }, request(100), 150);
    call.record(attempt(null, "error", 503, "http_503"));
    const served = call.record(attempt(usage(30, 7)));
    expect(rows.map((r) => [r.requestId, r.attempt, r.outcome, r.status, r.costUsd])).toEqual([["req-2", 1, "error", 503, 0], ["req-2", 2, "ok", 200, served]]);
    expect(rows[0]!.recordKey).not.toBe(rows[1]!.recordKey);
    expect(rows.every((r) => r.routingKeyId === key.id && r.endpoint === "chat" && r.model === MODEL)).toBe(true);
    call.settle();
    expect(await counter(key)).toBe(toNano(served));
  });

  test("CONTRACT §7 idempotence: a call settles once; settling it again changes nothing", async () => {
    const key = keyWith(1);
    const call = await MoneyCall.open(deps, key, { requestId: "req-3", endpoint: "chat" }, request(100), 150);
    const cost = call.record(attempt(usage(20, 5)));
    call.settle();
    const after = await counter(key);
    expect(after).toBe(toNano(cost));
    call.settle();
    call.settle();
    expect(await counter(key)).toBe(after);
  });

  test("CONTRACT §7 abandoned: a call the client left after the upstream accepted it costs its prompt, never $0", async () => {
    const key = keyWith(1);
    const body = request(400);
    const call = await MoneyCall.open(deps, key, { requestId: "req-4", endpoint: "chat" }, body, 400);
    const rr = { bytes: 400 } as RelayRequest;
    const { usage: soFar, counted } = usageSoFar(rr, null, 0);
    expect(counted).toBe(false);
    const cost = call.record(attempt(soFar, "aborted", 0, "client_closed_tokens_estimated"));
    expect(cost).toBeGreaterThan(0);
    expect(rows.at(-1)).toMatchObject({ outcome: "aborted", promptTokens: 100, completionTokens: 0, costUsd: cost });
    call.settle();
    expect(await counter(key)).toBe(toNano(cost));
  });

  test("CONTRACT §7: a call that ends before anything was sent gives its whole reservation back", async () => {
    const key = keyWith(1);
    const call = await MoneyCall.open(deps, key, { requestId: "req-5", endpoint: "chat" }, request(800), 300);
    expect(await counter(key)).toBeGreaterThan(0);
    call.settle();
    expect(await counter(key)).toBe(0);
    expect(call.countedUsd).toBe(0);
  });

  test("CONTRACT §7 budget: a request whose smallest cost does not fit the budget is refused 402 budget_exceeded, nothing reserved", async () => {
    const key = keyWith(0.000001);
    let err: unknown;
    try {
      await MoneyCall.open(deps, key, { requestId: "req-6", endpoint: "chat" }, request(4000), 5000);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).status).toBe(402);
    expect((err as GatewayError).code).toBe("budget_exceeded");
    expect(await counter(key)).toBe(0);
    // The request's record reads this 402 as a budget refusal (gateway_budget_rejections_total).
    const record = new RequestTracker().open("req-6", "POST", "/v1/chat/completions");
    record.noteRefusal("chat", err);
    expect(record.budgetRefused).toBe("chat");
    expect(refusals).toEqual([{ keyId: key.id, kind: "budget" }]);
  });

  test("CONTRACT §7 budget: once the month's spend reaches the budget, the next request is refused 402", async () => {
    const body = request(100);
    const key = keyWith(1);
    const est = estimateRequest(deps, key, body, 150)!;
    key.monthlyBudgetUsd = est.usd * 1.5;
    const first = await MoneyCall.open(deps, key, { requestId: "req-7a", endpoint: "chat" }, body, 150);
    // The upstream billed the whole worst case: the spend stays at the reservation.
    first.record(attempt(usage(150, 100)));
    first.settle();
    expect(await counter(key)).toBeGreaterThan(toNano(est.usd * 0.5));
    await expect(MoneyCall.open(deps, key, { requestId: "req-7b", endpoint: "chat" }, body, 150)).rejects.toMatchObject({ status: 402, code: "budget_exceeded" });
  });

  test("CONTRACT §7 budget: within the budget a request is admitted as sent; near its end with a lowered output limit that what remains pays for", async () => {
    const body = request(2000);
    const key = keyWith(1);
    const est = estimateRequest(deps, key, body, 200)!;
    // Room for the prompt and a useful answer, not for the whole worst case.
    key.monthlyBudgetUsd = est.minUsd + (est.usd - est.minUsd) / 2;
    const near = await MoneyCall.open(deps, key, { requestId: "req-8", endpoint: "chat" }, body, 200);
    expect(near.outputLimit).not.toBeNull();
    expect(near.outputLimit!).toBeLessThan(2000);
    expect(near.outputLimit!).toBeGreaterThanOrEqual(256);
    // What was reserved is the whole budget, and the lowered limit's worst case fits in it.
    expect(await counter(key)).toBe(toNano(key.monthlyBudgetUsd));
    const worstLowered = estimateRequest(deps, key, request(near.outputLimit!), 200)!.usd;
    expect(worstLowered).toBeLessThanOrEqual(key.monthlyBudgetUsd + 1e-9);
    near.settle();

    const roomy = keyWith(10);
    const admitted = await MoneyCall.open(deps, roomy, { requestId: "req-9", endpoint: "chat" }, body, 200);
    expect(admitted.outputLimit).toBeNull();
    expect(await counter(roomy)).toBe(toNano(est.usd));
    admitted.settle();
  });

  test("CONTRACT §7: a key without a budget reserves nothing and still adds its spend to the month's counter", async () => {
    const key = keyWith(null);
    const call = await MoneyCall.open(deps, key, { requestId: "req-10", endpoint: "chat" }, request(100), 150);
    expect(await counter(key)).toBe(0);
    const cost = call.record(attempt(usage(25, 10)));
    call.settle();
    expect(await counter(key)).toBe(toNano(cost));
  });
});
