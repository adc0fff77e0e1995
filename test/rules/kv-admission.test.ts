// Admission in the in-process store (src/store/kv/memory.ts), called directly: the embedded mode's
// real KV, not a mock. One reserve() decides the budget (CONTRACT §7) and the key's rate limits
// (CONTRACT §8) together, budget first; settlements give tokens, requests and leases back.
// The Redis scripts are held to the same rules through gateways in test/relay/.
import { afterEach, describe, expect, test } from "bun:test";
import { MemoryKV } from "../../src/store/kv/memory.ts";
import type { KeyLimits } from "../../src/store/kv/limit-window.ts";
import type { LimitCall } from "../../src/store/kv/types.ts";

const TTL = 3600;
const open: MemoryKV[] = [];
afterEach(async () => { for (const kv of open.splice(0)) await kv.close(); }, 5_000);

let seq = 0;
/** A store with one key's month counter seeded at `spent` (null: no counter yet). */
async function store(spent: number | null = 0) {
  const kv = new MemoryKV();
  open.push(kv);
  const key = `budget:${++seq}`;
  if (spent !== null) await kv.seed(key, spent, TTL);
  const keys = { log: `${key}:log`, amounts: `${key}:amounts`, leases: `${key}:leases` };
  const limits = (l: Partial<KeyLimits>, entry: string, ask: { requests?: number; tokens?: number; leases?: number } = {}, now = 1_000_000): LimitCall => ({
    keys,
    limits: { rpm: null, tpm: null, concurrency: null, ...l },
    ask: { requests: ask.requests ?? 1, tokens: ask.tokens ?? 0, leases: ask.leases ?? 0, entry },
    leaseTtlMs: 90_000,
    now,
  });
  return { kv, key, keys, limits };
}

describe("budget admission in the in-process store (CONTRACT §7)", () => {
  test("CONTRACT §7 budget: a worst case that fits is admitted and added to the month counter", async () => {
    const { kv, key } = await store(100);
    const r = await kv.reserve(key, 300, 50, 1000, TTL);
    expect(r).toMatchObject({ ok: true, missing: false, granted: 300, total: 400 });
    expect(await kv.getNumber(key)).toBe(400);
  });

  test("CONTRACT §7 budget: once spend reaches monthly_budget_usd the reservation is refused (402 budget_exceeded) and nothing is added", async () => {
    const { kv, key } = await store(1000);
    const r = await kv.reserve(key, 1, 1, 1000, TTL);
    expect(r).toMatchObject({ ok: false, missing: false, granted: 0, total: 1000 });
    expect(await kv.getNumber(key)).toBe(1000);
  });

  test("CONTRACT §7 budget is a ceiling: a worst case that does not fit but whose prompt and useful answer do is granted exactly what remains; a smaller remainder is refused", async () => {
    const { kv, key } = await store(800);
    const lowered = await kv.reserve(key, 500, 100, 1000, TTL);
    expect(lowered).toMatchObject({ ok: true, granted: 200, total: 1000 });
    const again = await store(800);
    const refused = await again.kv.reserve(again.key, 500, 201, 1000, TTL);
    expect(refused).toMatchObject({ ok: false, granted: 0, total: 800 });
    expect(await again.kv.getNumber(again.key)).toBe(800);
  });

  test("CONTRACT §7 budget: a missing counter admits nothing and says so (the caller rebuilds it from Postgres, then asks again)", async () => {
    const { kv, key } = await store(null);
    expect(await kv.reserve(key, 10, 10, 1000, TTL)).toMatchObject({ ok: false, missing: true, granted: 0 });
    await kv.seed(key, 990, TTL);
    await kv.seed(key, 0, TTL); // seeding never overwrites a live counter
    expect(await kv.reserve(key, 10, 10, 1000, TTL)).toMatchObject({ ok: true, granted: 10, total: 1000 });
  });

  test("CONTRACT §7 settles to its real cost: the refund lowers the counter and is usable at once", async () => {
    const { kv, key } = await store(0);
    expect((await kv.reserve(key, 1000, 1000, 1000, TTL)).ok).toBe(true);
    expect((await kv.reserve(key, 1, 1, 1000, TTL)).ok).toBe(false);
    // Settlement: reserved 1000, the real cost was 400.
    expect(await kv.adjust(key, -600, TTL)).toBe(400);
    expect(await kv.reserve(key, 600, 600, 1000, TTL)).toMatchObject({ ok: true, granted: 600, total: 1000 });
  });

  test("CONTRACT §7: a key without a budget (limit -1) counts nothing and needs no counter", async () => {
    const { kv, key } = await store(null);
    expect(await kv.reserve(key, 500, 500, -1, TTL)).toMatchObject({ ok: true, missing: false, granted: 0 });
    expect(await kv.getNumber(key)).toBeNull();
  });
});

describe("rate limits admitted with the budget in the in-process store (CONTRACT §8)", () => {
  test("CONTRACT §8 rate limits: over rpm_limit the admission is refused (429, type requests) and adds nothing to the budget", async () => {
    const { kv, key, limits } = await store(0);
    for (const id of ["a", "b"]) expect((await kv.reserve(key, 10, 10, 1000, TTL, undefined, limits({ rpm: 2 }, id))).ok).toBe(true);
    const r = await kv.reserve(key, 10, 10, 1000, TTL, undefined, limits({ rpm: 2 }, "c"));
    expect(r.ok).toBe(false);
    expect(r.missing).toBe(false);
    expect(r.limits?.refused).toBe("requests");
    expect(r.limits!.retryMs).toBeGreaterThan(0);
    expect(await kv.getNumber(key)).toBe(20);
  });

  test("CONTRACT §8 rate limits: over tpm_limit the admission is refused (429, type tokens); a settlement's token refund is usable at once", async () => {
    const { kv, keys, limits } = await store(null);
    expect((await kv.reserve("none", 0, 0, -1, TTL, undefined, limits({ tpm: 1000 }, "big", { tokens: 900 }))).ok).toBe(true);
    const over = await kv.reserve("none", 0, 0, -1, TTL, undefined, limits({ tpm: 1000 }, "next", { tokens: 200 }));
    expect(over.limits?.refused).toBe("tokens");
    // The first request used 300 of its 900 reserved tokens.
    await kv.releaseLimits(keys, [{ entry: "big", requests: 0, tokens: -600 }], []);
    const fits = await kv.reserve("none", 0, 0, -1, TTL, undefined, limits({ tpm: 1000 }, "next", { tokens: 200 }));
    expect(fits.ok).toBe(true);
    expect(fits.limits?.remainingTokens).toBe(500);
  });

  test("CONTRACT §8 order of checks: the budget (402) is decided before the rate limit (429), and a budget refusal takes no request from the window", async () => {
    const { kv, key, limits } = await store(1000);
    const r = await kv.reserve(key, 10, 10, 1000, TTL, undefined, limits({ rpm: 1 }, "a"));
    expect(r.ok).toBe(false);
    expect(r.limits).toBeUndefined(); // refused by the budget, not the limits
    // The refused request was not counted: the one request the minute allows is still there.
    await kv.adjust(key, -1000, TTL);
    expect((await kv.reserve(key, 10, 10, 1000, TTL, undefined, limits({ rpm: 1 }, "b"))).ok).toBe(true);
  });

  test("CONTRACT §8 concurrency: max_concurrent_requests caps the leases held; a settled request gives its lease back", async () => {
    const { kv, keys, limits } = await store(null);
    const cap = { concurrency: 2 };
    for (const id of ["a", "b"]) expect((await kv.reserve("none", 0, 0, -1, TTL, undefined, limits(cap, id, { leases: 1 }))).ok).toBe(true);
    const third = await kv.reserve("none", 0, 0, -1, TTL, undefined, limits(cap, "c", { leases: 1 }));
    expect(third.ok).toBe(false);
    expect(third.limits?.refused).toBe("concurrency");
    await kv.releaseLimits(keys, [], ["a:1"]);
    expect((await kv.reserve("none", 0, 0, -1, TTL, undefined, limits(cap, "c", { leases: 1 }))).ok).toBe(true);
  });

  test("CONTRACT §8: a refusal by the limits leaves the budget counter untouched even when the budget had room", async () => {
    const { kv, key, limits } = await store(0);
    expect((await kv.reserve(key, 100, 100, 1000, TTL, undefined, limits({ concurrency: 1 }, "a", { leases: 1 }))).ok).toBe(true);
    const r = await kv.reserve(key, 100, 100, 1000, TTL, undefined, limits({ concurrency: 1 }, "b", { leases: 1 }));
    expect(r).toMatchObject({ ok: false, granted: 0 });
    expect(r.limits?.refused).toBe("concurrency");
    expect(await kv.getNumber(key)).toBe(100);
  });
});
