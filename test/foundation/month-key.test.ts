// Budget counters are scoped to the UTC calendar month (SPEC: monthly budgets). monthKey() keeps
// the current month with its bounds instead of formatting a Date per call; the month must still
// change at the boundary, and follow a clock that jumps back.
import { afterEach, describe, expect, setSystemTime, test } from "bun:test";
import { monthKey, secondsToMonthEnd } from "../../src/lib/time.ts";

afterEach(() => setSystemTime(), 60_000);

describe("monthKey: the UTC calendar month budgets count in", () => {
  test("changes at the first millisecond of the next UTC month, and back when the clock steps back", () => {
    setSystemTime(new Date("2026-11-30T23:59:59.999Z"));
    expect(monthKey()).toBe("2026-11");
    setSystemTime(new Date("2026-12-01T00:00:00.000Z"));
    expect(monthKey()).toBe("2026-12");
    setSystemTime(new Date("2027-01-01T00:00:00.000Z"));
    expect(monthKey()).toBe("2027-01");
    setSystemTime(new Date("2026-12-31T23:59:59.999Z"));
    expect(monthKey()).toBe("2026-12");
  });

  test("seconds to the month's end follow the same clock", () => {
    setSystemTime(new Date("2026-11-30T23:59:00.000Z"));
    expect(secondsToMonthEnd()).toBe(60);
    setSystemTime(new Date("2026-12-31T23:59:59.500Z"));
    expect(secondsToMonthEnd()).toBe(1);
    expect(secondsToMonthEnd(new Date("2026-02-28T00:00:00Z"))).toBe(86_400);
  });

  test("a given date is formatted as it is", () => {
    expect(monthKey(new Date("2024-02-29T12:00:00Z"))).toBe("2024-02");
    expect(monthKey(new Date(Date.UTC(2025, 0, 1)))).toBe("2025-01");
  });
});
