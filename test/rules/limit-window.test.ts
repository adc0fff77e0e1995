// The numbers the rate-limit window hands to the response (CONTRACT §8: Retry-After,
// retry-after-ms and OpenAI's x-ratelimit-* headers), from src/store/kv/limit-window.ts with the
// clock passed in. Which admissions are refused is checked against the definition in
// test/relay/rate-window.property.test.ts; this file checks the waits and the remainders.
import { describe, expect, test } from "bun:test";
import { LimitWindow, WINDOW_MS, type KeyLimits, type LimitAsk } from "../../src/store/kv/limit-window.ts";

const T0 = 5_000_000;
const LEASE_MS = 90_000;
const none: KeyLimits = { rpm: null, tpm: null, concurrency: null };
let n = 0;
const ask = (a: Partial<LimitAsk> = {}): LimitAsk => ({ requests: 1, tokens: 0, leases: 0, entry: `e${++n}`, ...a });

describe("rate-limit window: waits and remainders (CONTRACT §8)", () => {
  test("CONTRACT §8 rate limits: Retry-After is the time until enough of the oldest admissions leave the 60 s window", () => {
    const w = new LimitWindow();
    const l = { ...none, rpm: 3 };
    w.admit(l, ask(), T0, LEASE_MS);
    w.admit(l, ask(), T0 + 10_000, LEASE_MS);
    w.admit(l, ask(), T0 + 20_000, LEASE_MS);
    const refused = w.admit(l, ask(), T0 + 30_000, LEASE_MS);
    expect(refused.refused).toBe("requests");
    expect(refused.retryMs).toBe(WINDOW_MS - 30_000); // the first admission leaves at T0 + 60 s
    // Two requests at once need the two oldest gone.
    expect(w.admit(l, ask({ requests: 2 }), T0 + 30_000, LEASE_MS).retryMs).toBe(WINDOW_MS + 10_000 - 30_000);
    // At the time it named, the request fits.
    expect(w.admit(l, ask(), T0 + WINDOW_MS, LEASE_MS).refused).toBeNull();
  });

  test("CONTRACT §8 rate limits: an ask larger than the limit can never fit (retry -1), for requests and tokens alike", () => {
    const w = new LimitWindow();
    expect(w.admit({ ...none, rpm: 5 }, ask({ requests: 6 }), T0, LEASE_MS)).toMatchObject({ refused: "requests", retryMs: -1 });
    expect(w.admit({ ...none, tpm: 100 }, ask({ tokens: 101 }), T0, LEASE_MS)).toMatchObject({ refused: "tokens", retryMs: -1 });
    expect(w.admit({ ...none, concurrency: 1 }, ask({ leases: 2 }), T0, LEASE_MS)).toMatchObject({ refused: "concurrency", retryMs: -1 });
  });

  test("CONTRACT §8 x-ratelimit-* headers: remaining requests and tokens after the admission, reset when the oldest entry leaves; -1/0 for limits the key does not have", () => {
    const w = new LimitWindow();
    const l = { ...none, rpm: 10, tpm: 1000 };
    const first = w.admit(l, ask({ tokens: 300 }), T0, LEASE_MS);
    expect(first).toMatchObject({ refused: null, remainingRequests: 9, remainingTokens: 700, resetRequestsMs: WINDOW_MS, resetTokensMs: WINDOW_MS });
    const second = w.admit(l, ask({ tokens: 200 }), T0 + 15_000, LEASE_MS);
    expect(second).toMatchObject({ remainingRequests: 8, remainingTokens: 500, resetRequestsMs: WINDOW_MS - 15_000 });
    const unlimited = new LimitWindow().admit(none, ask({ tokens: 50 }), T0, LEASE_MS);
    expect(unlimited).toMatchObject({ refused: null, remainingRequests: -1, resetRequestsMs: 0, remainingTokens: -1, resetTokensMs: 0 });
  });

  test("CONTRACT §8 concurrency: a lease not given back stops counting when it expires (a holder that died), and the refusal asks for a retry in 1 s", () => {
    const w = new LimitWindow();
    const l = { ...none, concurrency: 1 };
    expect(w.admit(l, ask({ leases: 1 }), T0, LEASE_MS).refused).toBeNull();
    expect(w.admit(l, ask({ leases: 1 }), T0 + LEASE_MS - 1, LEASE_MS)).toMatchObject({ refused: "concurrency", retryMs: 1000 });
    expect(w.leasesHeld(T0 + LEASE_MS - 1)).toBe(1);
    expect(w.admit(l, ask({ leases: 1 }), T0 + LEASE_MS, LEASE_MS).refused).toBeNull();
  });

  test("CONTRACT §8 slices: an entry taken ahead counts from now until its time ahead plus 60 s", () => {
    const w = new LimitWindow();
    const l = { ...none, rpm: 1 };
    expect(w.admit(l, ask(), T0, LEASE_MS, 1000).refused).toBeNull();
    expect(w.admit(l, ask(), T0 + WINDOW_MS, LEASE_MS).refused).toBe("requests");
    expect(w.admit(l, ask(), T0 + WINDOW_MS + 1000, LEASE_MS).refused).toBeNull();
  });

  test("CONTRACT §8: settlement lowers an entry's tokens and requests, never below zero, and the window is idle once nothing counts", () => {
    const w = new LimitWindow();
    const l = { ...none, rpm: 2, tpm: 100 };
    const a = ask({ requests: 2, tokens: 100 });
    w.admit(l, a, T0, LEASE_MS);
    w.release(a.entry, -500, [], -1);
    expect(w.admit(l, ask({ tokens: 100 }), T0 + 1, LEASE_MS)).toMatchObject({ refused: null, remainingRequests: 0, remainingTokens: 0 });
    expect(w.idle(T0 + WINDOW_MS)).toBe(false);
    expect(w.idle(T0 + WINDOW_MS + 1)).toBe(true);
  });
});
