// The ledger's copies of streamed usage records (src/money/ledger/unacked.ts): kept in stream-id
// order, dropped once the consumer group's committed watermark passes them, capped in rows.
import { describe, expect, test } from "bun:test";
import { callOfRecord, compareStreamIds, settlesOf, UnackedRecords } from "../../src/money/ledger/unacked.ts";
import type { UsageRow } from "../../src/relay/usage-queue.ts";

const rows = (n: number, tag: string) => Array.from({ length: n }, (_, i) => ({ recordKey: `${tag}.${i}.1` }) as UsageRow);
const key = { id: "rkey_1", monthlyBudgetUsd: null, budgetExcludesSeats: true };

describe("unacked usage records (copies kept until the drain commits them)", () => {
  test("stream ids compare by milliseconds, then sequence, numerically", () => {
    expect(compareStreamIds("1700000000000-0", "1700000000000-0")).toBe(0);
    expect(compareStreamIds("1700000000000-9", "1700000000000-10")).toBeLessThan(0);
    expect(compareStreamIds("1700000000001-0", "1700000000000-99")).toBeGreaterThan(0);
    expect(compareStreamIds("999-5", "1000-0")).toBeLessThan(0);
  });

  test("prune drops batches up to the watermark: inclusive after the last delivered id, exclusive before the oldest pending one", () => {
    const u = new UnackedRecords(() => {});
    u.keep("100-0", rows(2, "a"), []);
    u.keep("100-1", rows(3, "b"), []);
    u.keep("200-0", rows(1, "c"), []);
    expect(u.size).toBe(6);
    u.prune({ id: "100-1", before: true }); // 100-1 still pending: only 100-0 is committed
    expect(u.size).toBe(4);
    u.prune({ id: "100-1", before: false });
    expect(u.size).toBe(1);
    u.prune({ id: "50-0", before: false }); // an older watermark changes nothing
    expect(u.size).toBe(1);
    const taken = u.take();
    expect(taken.records.map((r) => r.recordKey)).toEqual(["c.0.1"]);
    expect(u.size).toBe(0);
  });

  test("past the cap the oldest copies go, and the drop is reported", () => {
    let dropped = 0;
    const u = new UnackedRecords((n) => (dropped += n));
    for (let i = 0; i < 5; i++) u.keep(`${i}-0`, rows(60_000, `k${i}`), []);
    expect(u.size).toBeLessThanOrEqual(200_000);
    expect(dropped).toBe(120_000);
    expect(u.take().records[0]!.recordKey).toBe("k2.0.1");
  });

  test("settlement lines are picked by money call", () => {
    expect(callOfRecord("Ab12.3f.2")).toBe("Ab12.3f");
    const settles = [{ id: "Ab.1", actual: 100, reserved: 0 }, { id: "Ab.2", actual: 200, reserved: 50 }, { id: "Ab.3", actual: 300, reserved: 0 }];
    expect(settlesOf(settles, new Set(["Ab.1", "Ab.3"]))).toEqual([settles[0]!, settles[2]!]);
    const u = new UnackedRecords(() => {});
    u.keep("1-0", rows(1, "Ab"), [{ key, month: "2026-11", settles }]);
    expect(u.take().settles).toEqual([{ key, month: "2026-11", settles }]);
  });
});
