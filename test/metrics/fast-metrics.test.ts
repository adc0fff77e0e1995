// The hot-path counters and histograms behind /metrics, exported through a prom-client Registry.
import { describe, expect, test } from "bun:test";
import { Registry } from "prom-client";
import { FastCounter, FastHistogram } from "../../src/metrics/fast-metrics.ts";
import { sample } from "./scrape.ts";

describe("fast metrics", () => {
  test("a value equal to a bucket bound counts in that bucket (le is inclusive), and buckets are cumulative", async () => {
    const reg = new Registry();
    const h = new FastHistogram("t_seconds", "test", ["a"], [0.1, 1], reg);
    const s = h.labels("x");
    for (const v of [0.05, 0.1, 0.5, 1, 7]) s.observe(v);
    const text = await reg.metrics();
    expect(text).toContain("# TYPE t_seconds histogram");
    expect(sample(text, "t_seconds_bucket", { a: "x", le: "0.1" })).toBe(2);
    expect(sample(text, "t_seconds_bucket", { a: "x", le: "1" })).toBe(4);
    expect(sample(text, "t_seconds_bucket", { a: "x", le: "+Inf" })).toBe(5);
    expect(sample(text, "t_seconds_count", { a: "x" })).toBe(5);
    expect(sample(text, "t_seconds_sum", { a: "x" })).toBeCloseTo(8.65, 9);
  });

  test("each label combination is its own series, and label values are escaped in the exposition", async () => {
    const reg = new Registry();
    const c = new FastCounter("t_total", "test", ["code"], reg);
    c.labels('say "hi"\\').inc();
    c.labels("b").inc(2);
    c.labels("b").inc();
    const text = await reg.metrics();
    expect(text).toContain('t_total{code="say \\"hi\\"\\\\"} 1');
    expect(sample(text, "t_total", { code: "b" })).toBe(3);
  });

  test("the wrong number of label values is refused", () => {
    const c = new FastCounter("t2_total", "test", ["a", "b"], new Registry());
    expect(() => c.labels("only-one")).toThrow("expected 2 label values");
  });

  test("a metric name is registered once per registry, and two registries stay apart", () => {
    const r1 = new Registry();
    const r2 = new Registry();
    new FastCounter("t3_total", "test", [], r1);
    new FastCounter("t3_total", "test", [], r2);
    expect(() => new FastCounter("t3_total", "test", [], r1)).toThrow("already been registered");
  });
});
