// The rate-limit arithmetic (CONTRACT §8) against a reference model, with fast-check: random
// bursts of admissions (single requests and batches), token refunds, lease returns, and clock
// steps forward and back. The reference is the definition itself, kept naive: an admission fits
// when the requests and tokens of the admissions made in the 60 s before it, plus its own, stay
// within the limits, and the leases not yet returned plus its own stay within the cap. Both
// implementations are held to it: the in-process window (embedded mode, Redis-down fallback)
// and, on real stores, Redis's ADMIT/RELEASE scripts with the clock passed in.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { REAL_STORES } from "../helpers/gateway.ts";
import { LimitWindow, WINDOW_MS, type KeyLimits } from "../../src/store/kv/limit-window.ts";
import { RedisKV } from "../../src/store/kv/redis.ts";
import { randomToken } from "../../src/lib/crypto.ts";

type Op =
  | { kind: "admit"; dt: number; requests: number; tokens: number; ahead: number }
  | { kind: "refund"; which: number; to: number; requestsTo: number }
  | { kind: "return"; which: number };

interface Admitted { id: string; at: number; requests: number; tokens: number; leases: number; returned: boolean }

/**
 * The definition, naively. With the clock stepped back, an admission once out of the window stays
 * out: it counts while its time is within 60 s of the latest clock reading seen so far.
 */
class Reference {
  admitted: Admitted[] = [];
  latest = -Infinity;
  inWindow(a: Admitted) {
    return a.at > this.latest - WINDOW_MS;
  }
  fits(l: KeyLimits, now: number, requests: number, tokens: number, leases: number) {
    this.latest = Math.max(this.latest, now);
    const live = this.admitted.filter((a) => this.inWindow(a));
    const n = live.reduce((s, a) => s + a.requests, 0);
    const t = live.reduce((s, a) => s + a.tokens, 0);
    const held = this.admitted.filter((a) => !a.returned).reduce((s, a) => s + a.leases, 0);
    if (l.rpm !== null && n + requests > l.rpm) return "requests";
    if (l.tpm !== null && t + tokens > l.tpm) return "tokens";
    if (l.concurrency !== null && held + leases > l.concurrency) return "concurrency";
    return null;
  }
}

const limitsArb = fc.record({
  rpm: fc.option(fc.integer({ min: 1, max: 8 }), { nil: null }),
  tpm: fc.option(fc.integer({ min: 50, max: 400 }), { nil: null }),
  concurrency: fc.option(fc.integer({ min: 1, max: 4 }), { nil: null }),
});
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant("admit" as const), dt: fc.oneof(fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 20_000, max: 61_000 }), fc.integer({ min: -5000, max: -1 })), requests: fc.integer({ min: 1, max: 3 }), tokens: fc.integer({ min: 0, max: 200 }), ahead: fc.constantFrom(0, 0, 1000) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("refund" as const), which: fc.nat(), to: fc.integer({ min: 0, max: 200 }), requestsTo: fc.integer({ min: 0, max: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("return" as const), which: fc.nat() }) },
);

/** Runs ops against one implementation and the reference; every verdict must agree. */
async function check(limits: KeyLimits, ops: Op[], impl: {
  admit(now: number, id: string, requests: number, tokens: number, leases: number, ahead: number): Promise<string | null>;
  release(id: string, tokenDelta: number, leaseIds: string[], requestDelta: number): Promise<void>;
}) {
  const ref = new Reference();
  let now = 1_000_000;
  let seq = 0;
  for (const op of ops) {
    if (op.kind === "admit") {
      now += op.dt;
      const leases = limits.concurrency === null ? 0 : 1;
      const id = `e${++seq}`;
      const expected = ref.fits(limits, now, op.requests, op.tokens, leases);
      const got = await impl.admit(now, id, op.requests, op.tokens, leases, op.ahead);
      expect(got).toBe(expected);
      // A slice taken ahead counts from now until `ahead` + 60 s.
      if (got === null) ref.admitted.push({ id, at: now + op.ahead, requests: op.requests, tokens: op.tokens, leases, returned: false });
    } else if (ref.admitted.length) {
      const a = ref.admitted[op.which % ref.admitted.length]!;
      if (op.kind === "refund") {
        // Settlement only lowers a reservation (real ≤ reserved; a slice's unused requests); an
        // entry out of the window is left alone.
        const to = Math.min(a.tokens, op.to);
        const requestsTo = Math.min(a.requests, op.requestsTo);
        await impl.release(a.id, to - a.tokens, [], requestsTo - a.requests);
        if (ref.inWindow(a)) {
          a.tokens = to;
          a.requests = requestsTo;
        }
      } else if (!a.returned) {
        a.returned = true;
        await impl.release(a.id, 0, a.leases ? [`${a.id}:1`] : [], 0);
      }
    }
  }
}

describe("rate-limit window arithmetic (property-based, against a reference model)", () => {
  test("the in-process window agrees with the definition on every admission", async () => {
    await fc.assert(fc.asyncProperty(limitsArb, fc.array(opArb, { minLength: 20, maxLength: 80 }), async (limits, ops) => {
      const w = new LimitWindow();
      await check(limits, ops, {
        admit: async (now, entry, requests, tokens, leases, ahead) => w.admit(limits, { entry, requests, tokens, leases }, now, Number.MAX_SAFE_INTEGER, ahead).refused,
        release: async (id, delta, leaseIds, requestDelta) => w.release(id, delta, leaseIds, requestDelta),
      });
    }), { numRuns: 300 });
  });

  // A concurrency lease held in Redis expires after its TTL (a crashed instance's holds come back);
  // the reference holds a lease until it is returned, and a run's clock steps add up to an hour at
  // most (60 ops × 61 s): with a 10-minute TTL a long run saw a lease lapse that the model still held.
  const LEASE_TTL_MS = 24 * 3600_000;
  test.if(REAL_STORES)("Redis's admission script agrees with the definition on every admission (clock passed in)", async () => {
    const kv = new RedisKV(process.env.REDIS_URL!);
    await kv.ping();
    try {
      await fc.assert(fc.asyncProperty(limitsArb, fc.array(opArb, { minLength: 20, maxLength: 60 }), async (limits, ops) => {
        const tag = `gw:{k:prop-${randomToken(6)}}`;
        const keys = { log: `${tag}:rl:w`, amounts: `${tag}:rl:a`, leases: `${tag}:rl:l` };
        await check(limits, ops, {
          admit: async (now, entry, requests, tokens, leases, ahead) => {
            const r = await kv.reserve(`${tag}:budget`, 0, 0, -1, 60, undefined, { keys, limits, ask: { entry, requests, tokens, leases }, leaseTtlMs: LEASE_TTL_MS, now, aheadMs: ahead });
            return r.limits!.refused;
          },
          release: (id, delta, leaseIds, requestDelta) => kv.releaseLimits(keys, delta || requestDelta ? [{ entry: id, requests: requestDelta, tokens: delta }] : [], leaseIds),
        });
      }), { numRuns: 60 });
    } finally {
      await kv.close();
    }
  }, 60_000);
});
