// /metrics: Prometheus exposition of one gateway instance's own registry.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import type { GatewayMetrics } from "../../src/metrics/index.ts";
import { finishedRecord, laneTry, sample } from "./scrape.ts";

describe(`metrics exposition (${storesLabel})`, () => {
  let a: TestGateway;
  let b: TestGateway;
  beforeAll(async () => {
    [a, b] = await Promise.all([startTestGateway(), startTestGateway()]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  }, 60_000);

  test("GET /metrics answers the Prometheus text format without authentication", async () => {
    const r = await a.req("/metrics");
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("text/plain");
    expect(r.headers.get("content-type")).toContain("version=0.0.4");
    const text = await r.text();
    for (const [name, type] of [
      ["gateway_requests_total", "counter"],
      ["gateway_request_duration_seconds", "histogram"],
      ["gateway_time_to_first_byte_seconds", "histogram"],
      ["gateway_fallbacks_total", "counter"],
      ["gateway_budget_rejections_total", "counter"],
      ["gateway_upstream_errors_total", "counter"],
      ["gateway_usage_queue_depth", "gauge"],
    ] as const) {
      expect(text).toContain(`# TYPE ${name} ${type}`);
    }
  });

  test("a wrong method on /metrics answers 405 method_not_allowed", async () => {
    const r = await a.call("/metrics", { method: "POST", body: {} });
    expect(r.status).toBe(405);
    expect(r.body.code).toBe("method_not_allowed");
  });

  test("each gateway instance counts into its own registry", async () => {
    const m = a.ctx.services.metrics as GatewayMetrics;
    m.record(finishedRecord({ endpoint: "chat", provider: "openai", outcome: "ok", status: 200, ttfbMs: 2 }, 3));
    m.record(finishedRecord({ endpoint: "chat", provider: "openai", outcome: "ok", status: 200, ttfbMs: null }, 40));
    const ta = await (await a.req("/metrics")).text();
    const tb = await (await b.req("/metrics")).text();
    const labels = { endpoint: "chat", provider: "openai", outcome: "ok" };
    expect(sample(ta, "gateway_requests_total", labels)).toBe(2);
    expect(sample(tb, "gateway_requests_total", labels)).toBeUndefined();
    // Milliseconds in, seconds out: 3 ms falls in the 5 ms bucket, 40 ms does not.
    expect(sample(ta, "gateway_request_duration_seconds_bucket", { ...labels, le: "0.005" })).toBe(1);
    expect(sample(ta, "gateway_request_duration_seconds_bucket", { ...labels, le: "0.05" })).toBe(2);
    expect(sample(ta, "gateway_request_duration_seconds_sum", labels)).toBeCloseTo(0.043, 6);
    // Time to first byte only when there was one.
    expect(sample(ta, "gateway_time_to_first_byte_seconds_count", labels)).toBe(1);
  });

  test("a request that reached no provider is labelled provider=\"none\"", async () => {
    b.ctx.services.metrics.record(finishedRecord({ endpoint: "responses", provider: null, outcome: "invalid_api_key", status: 401 }, 0.2));
    const text = await (await b.req("/metrics")).text();
    expect(sample(text, "gateway_requests_total", { endpoint: "responses", provider: "none", outcome: "invalid_api_key" })).toBe(1);
  });

  test("fallbacks, budget rejections and upstream errors by code are counted", async () => {
    const m = b.ctx.services.metrics;
    // A lane that failed over (its upstream answered 503), and two requests refused by the budget.
    m.record(finishedRecord({ endpoint: "chat", lanes: [laneTry({ provider: "openai", lane: 0, status: 503, code: "http_503", upstreamStatus: 503, upstreamCode: "http_503", fellBack: true })] }));
    m.record(finishedRecord({ endpoint: "chat", budgetRefused: "chat" }));
    m.record(finishedRecord({ endpoint: "chat", budgetRefused: "chat" }));
    const text = await (await b.req("/metrics")).text();
    expect(sample(text, "gateway_fallbacks_total", { endpoint: "chat", from_provider: "openai", reason: "http_503" })).toBe(1);
    expect(sample(text, "gateway_budget_rejections_total", { endpoint: "chat" })).toBe(2);
    expect(sample(text, "gateway_upstream_errors_total", { provider: "openai", status: "503", code: "http_503" })).toBe(1);
  });

  test("the usage-queue depth gauge reads the queue's length at scrape time", async () => {
    const m = a.ctx.services.metrics as GatewayMetrics;
    let depth = 7;
    m.setUsageQueueDepthSource(() => depth);
    expect(sample(await (await a.req("/metrics")).text(), "gateway_usage_queue_depth")).toBe(7);
    depth = 0;
    expect(sample(await (await a.req("/metrics")).text(), "gateway_usage_queue_depth")).toBe(0);
  });
});
