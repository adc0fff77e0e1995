// Slice arithmetic (src/relay/slices.ts): how much of a hot key's limit or budget one instance may
// take to admit from locally (CONTRACT §7: a lease is a slice of the key's remaining budget that
// shrinks as the budget runs low, and near the end admission is per request again; the same
// slices serve rate limits, CONTRACT §8). No gateway: test/relay/budget-leases.test.ts and
// rate-limits-shared.test.ts check the slices across instances.
import { describe, expect, test } from "bun:test";
import { HotKeys, SLICE_MS, sliceSize } from "../../src/relay/slices.ts";

describe("slice sizes (CONTRACT §7 leases)", () => {
  test("CONTRACT §7 leases: a slice is a tenth of the limit shared among the live instances", () => {
    expect(sliceSize(1000, 1000, 1)).toBe(100);
    expect(sliceSize(1000, 1000, 4)).toBe(25);
    // No live instance known yet counts as this one.
    expect(sliceSize(1000, 1000, 0)).toBe(100);
  });
  test("CONTRACT §7 leases: the slice shrinks as the budget runs low (at most a quarter of what remains), floored", () => {
    expect(sliceSize(1000, 200, 1)).toBe(50);
    expect(sliceSize(1000, 3, 1)).toBe(0);
    expect(sliceSize(999, 999, 1)).toBe(99);
  });
  test("CONTRACT §7 leases: near the end, or for a limit too small to divide, there is no slice (every admission goes to the shared store)", () => {
    expect(sliceSize(1000, 0, 1)).toBe(0);
    expect(sliceSize(9, 9, 1)).toBe(0);
    expect(sliceSize(1000, -50, 1)).toBe(0);
  });
});

describe("hot keys (CONTRACT §7 leases, CONTRACT §8 rate limits)", () => {
  test("CONTRACT §7 leases: a key is hot for SLICE_MS after an admission, with what that admission left", () => {
    const hot = new HotKeys<number>();
    const t = 1_000_000;
    expect(hot.hot("k", t)).toBeNull();
    hot.admitted("k", 42, t);
    expect(hot.hot("k", t + SLICE_MS)).toBe(42);
    expect(hot.hot("k", t + SLICE_MS + 1)).toBeNull();
    hot.admitted("k", 7, t + 500);
    expect(hot.hot("k", t + 500 + SLICE_MS)).toBe(7);
  });
  test("CONTRACT §7 leases: a forgotten or pruned key is cold at once; a recent one survives pruning", () => {
    const hot = new HotKeys<string>();
    const t = 2_000_000;
    hot.admitted("old", "a", t);
    hot.admitted("new", "b", t + SLICE_MS);
    hot.admitted("gone", "c", t + SLICE_MS);
    hot.forget("gone");
    hot.prune(t + SLICE_MS + 1);
    expect(hot.hot("old", t)).toBeNull();
    expect(hot.hot("new", t + SLICE_MS + 1)).toBe("b");
    expect(hot.hot("gone", t + SLICE_MS)).toBeNull();
  });
});
