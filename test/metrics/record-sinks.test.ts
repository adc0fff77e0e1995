// The request record's sinks, without a gateway: a finished record (http/access-log.ts) becomes
// its access line, its Prometheus deltas and its spans, each read once when the record is
// released. The records are filled through the same methods the relay calls (laneStarted,
// attemptEnded, upstreamFailed, laneFailed, noteRefusal), so these rules hold for what the relay
// writes: docs/observability.md's metric labels, SPEC's gateway_requests_total help text (a
// request counts under the provider that served or was last tried, `none` when none was reached),
// the access line's fields.
import { describe, expect, test } from "bun:test";
import * as api from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { accessJson, RequestTracker, type AccessEntry } from "../../src/http/access-log.ts";
import { GatewayError } from "../../src/errors.ts";
import { createGatewayMetrics } from "../../src/metrics/index.ts";
import { recordSpans } from "../../src/metrics/tracing.ts";
import { sample } from "./scrape.ts";

/** A tracker with the three sinks as the gateway attaches them: metrics read prompts' records too. */
function sinks() {
  const tracker = new RequestTracker();
  const metrics = createGatewayMetrics(tracker);
  tracker.addSink(metrics.record, { parts: true });
  const lines: string[] = [];
  tracker.addSink((e) => lines.push(accessJson(e, 1_795_558_810_641)));
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracer = provider.getTracer("test");
  tracker.addSink((e) => recordSpans(api, tracer, e));
  const scrape = async () => (await metrics.render()).body;
  return { tracker, metrics, lines, spans: () => exporter.getFinishedSpans(), scrape };
}

/** POST /v1/chat/completions: openai answers 503 and the request falls over to groq, which serves it. */
function fellOver(tracker: RequestTracker): AccessEntry {
  const e = tracker.open("req-7", "POST", "/v1/chat/completions");
  e.endpoint = "chat";
  e.keyPrefix = "gw_AbC1234";
  e.model = "gpt-4o-mini";
  const a = e.laneStarted("openai", 0);
  e.attemptEnded(a, "gpt-4o-mini", "error", 12, null, null, 0, 0);
  e.upstreamFailed(a, 503, "http_503");
  a.status = 503;
  e.laneFailed(0, 503, "http_503", true);
  const b = e.laneStarted("groq", 1);
  e.attemptEnded(b, "llama-3.1-8b-instant", "ok", 30, 8, 11, 7, 0.0000045);
  b.status = 200;
  e.outcome = "ok";
  e.provider = "groq";
  e.served = "groq";
  e.ttfbMs = 9;
  e.status = 200;
  return e;
}

const ns = (t: [number, number]) => BigInt(t[0]) * 1_000_000_000n + BigInt(t[1]);

describe("the request record's sinks", () => {
  test("released once: no sink reads the record before its release, and a stream holds it until its last byte", () => {
    const { tracker, lines } = sinks();
    const e = fellOver(tracker);
    e.holdForStream();
    expect(tracker.inFlight).toBe(1);
    expect(tracker.streams).toBe(1);
    e.release();
    expect(lines).toHaveLength(0);
    e.streamEnded();
    e.streamEnded();
    expect(lines).toHaveLength(1);
    expect(tracker.inFlight).toBe(0);
    expect(tracker.streams).toBe(0);
  });

  test("access line: a request that fell over names both lanes (the failed one with its code), the lane that served, the outcome, tokens and cost", () => {
    const { tracker, lines } = sinks();
    const e = fellOver(tracker);
    e.release();
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toEqual({
      level: 30, time: 1_795_558_810_641, log: "access", request_id: "req-7", method: "POST", route: "/v1/chat/completions",
      status: 200, duration_ms: Math.round((e.endedAt - e.startedAt) * 100) / 100, ttfb_ms: 9, key_prefix: "gw_AbC1234", model: "gpt-4o-mini",
      lanes: [{ provider: "openai", lane: 0, status: 503, code: "http_503" }, { provider: "groq", lane: 1, status: 200 }],
      served_by: "groq", input_tokens: 11, output_tokens: 7, cost_usd: 0.0000045, outcome: "ok", msg: "request",
    });
  });

  test("metrics: one request by endpoint, the provider that served and outcome; the upstream error by status and code; the fallback by the provider that failed and why; each attempt's duration, time to first byte only where there was one", async () => {
    const { tracker, scrape } = sinks();
    fellOver(tracker).release();
    const text = await scrape();
    const req = { endpoint: "chat", provider: "groq", outcome: "ok" };
    expect(sample(text, "gateway_requests_total", req)).toBe(1);
    expect(sample(text, "gateway_request_duration_seconds_count", req)).toBe(1);
    expect(sample(text, "gateway_time_to_first_byte_seconds_count", req)).toBe(1);
    expect(sample(text, "gateway_time_to_first_byte_seconds_sum", req)).toBeCloseTo(0.009, 9);
    expect(sample(text, "gateway_upstream_errors_total", { provider: "openai", status: "503", code: "http_503" })).toBe(1);
    expect(sample(text, "gateway_fallbacks_total", { endpoint: "chat", from_provider: "openai", reason: "http_503" })).toBe(1);
    expect(sample(text, "gateway_upstream_duration_seconds_count", { provider: "openai", outcome: "error" })).toBe(1);
    expect(sample(text, "gateway_upstream_duration_seconds_sum", { provider: "openai", outcome: "error" })).toBeCloseTo(0.012, 9);
    expect(sample(text, "gateway_upstream_duration_seconds_count", { provider: "groq", outcome: "ok" })).toBe(1);
    expect(sample(text, "gateway_upstream_time_to_first_byte_seconds_count", { provider: "groq", outcome: "ok" })).toBe(1);
    expect(sample(text, "gateway_upstream_time_to_first_byte_seconds_count", { provider: "openai", outcome: "error" })).toBe(0);
    expect(sample(text, "gateway_budget_rejections_total", { endpoint: "chat" })).toBeUndefined();
  });

  test("metrics: a request refused before any provider counts with provider=\"none\"; a 402 budget_exceeded also counts a budget rejection under its endpoint", async () => {
    const { tracker, scrape } = sinks();
    const refused = tracker.open("req-8", "POST", "/v1/responses");
    refused.endpoint = "responses";
    refused.outcome = "refused";
    refused.noteRefusal("responses", new GatewayError(402, "over budget", { code: "budget_exceeded" }));
    refused.release();
    const unauthorised = tracker.open("req-9", "POST", "/v1/responses");
    unauthorised.endpoint = "responses";
    unauthorised.outcome = "refused";
    unauthorised.noteRefusal("responses", new GatewayError(401, "no key", { code: "invalid_api_key" }));
    unauthorised.release();
    const text = await scrape();
    expect(sample(text, "gateway_requests_total", { endpoint: "responses", provider: "none", outcome: "refused" })).toBe(2);
    expect(sample(text, "gateway_budget_rejections_total", { endpoint: "responses" })).toBe(1);
  });

  test("metrics: a record that is no inference request (management, a /blitz batch) counts no request, but a batch's budget refusal counts under blitz", async () => {
    const { tracker, scrape, lines } = sinks();
    const mgmt = tracker.open("req-10", "GET", "/v1/organizations/me");
    mgmt.status = 200;
    mgmt.release();
    const batch = tracker.open("req-11", "POST", "/blitz");
    batch.budgetRefused = "blitz";
    batch.status = 402;
    batch.release();
    const text = await scrape();
    expect(text).not.toContain("gateway_requests_total{");
    expect(sample(text, "gateway_budget_rejections_total", { endpoint: "blitz" })).toBe(1);
    expect(lines).toHaveLength(2);
  });

  test("a /blitz prompt's record counts in the metrics as one blitz request, with no access line, no span and no in-flight request", async () => {
    const { tracker, scrape, lines, spans } = sinks();
    const p = tracker.openPart("req-12.0", "blitz");
    expect(tracker.inFlight).toBe(0);
    const t = p.laneStarted("openai", 0);
    p.attemptEnded(t, "gpt-4o-mini", "ok", 20, 5, 3, 2, 0.000001);
    p.outcome = "ok";
    p.provider = "openai";
    p.release();
    const hit = tracker.openPart("req-12.1", "blitz");
    hit.outcome = "cache_hit";
    hit.release();
    const text = await scrape();
    expect(sample(text, "gateway_requests_total", { endpoint: "blitz", provider: "openai", outcome: "ok" })).toBe(1);
    expect(sample(text, "gateway_requests_total", { endpoint: "blitz", provider: "none", outcome: "cache_hit" })).toBe(1);
    expect(sample(text, "gateway_upstream_duration_seconds_count", { provider: "openai", outcome: "ok" })).toBe(1);
    expect(lines).toHaveLength(0);
    expect(spans()).toHaveLength(0);
    expect(tracker.inFlight).toBe(0);
  });

  test("attempts beside the lanes (the classifier's, a lane's first attempt before its default-model retry) count in the upstream metrics, not in the line's lanes; the classifier's tokens and cost are not the request's", async () => {
    const { tracker, scrape, lines, spans } = sinks();
    const e = tracker.open("req-13", "POST", "/v1/chat/completions");
    e.endpoint = "chat";
    const c = e.asideStarted("openai", -1);
    e.attemptEnded(c, "gpt-4o-mini", "ok", 5, 4, 40, 1, 0.5);
    const l = e.laneStarted("anthropic", 0);
    e.attemptEnded(l, "claude-x", "error", 7, null, null, 0, 0);
    e.upstreamFailed(l, 404, "not_found_error");
    e.attemptEnded(l, "claude-default", "ok", 9, 3, 10, 4, 0.25);
    l.status = 200;
    e.outcome = "ok";
    e.provider = e.served = "anthropic";
    e.status = 200;
    e.release();
    const text = await scrape();
    expect(sample(text, "gateway_upstream_duration_seconds_count", { provider: "openai", outcome: "ok" })).toBe(1);
    expect(sample(text, "gateway_upstream_duration_seconds_count", { provider: "anthropic", outcome: "error" })).toBe(1);
    expect(sample(text, "gateway_upstream_duration_seconds_count", { provider: "anthropic", outcome: "ok" })).toBe(1);
    // The retried lane's first attempt keeps its upstream error; the lane itself does not fall over.
    expect(sample(text, "gateway_upstream_errors_total", { provider: "anthropic", status: "404", code: "other" })).toBe(1);
    expect(text).not.toContain("gateway_fallbacks_total{");
    const line = JSON.parse(lines[0]!);
    expect(line.lanes).toEqual([{ provider: "anthropic", lane: 0, status: 200 }]);
    expect([line.input_tokens, line.output_tokens, line.cost_usd]).toEqual([10, 4, 0.25]);
    expect(spans().filter((s) => s.kind === api.SpanKind.CLIENT).map((s) => s.attributes["gen_ai.response.model"])).toEqual(["claude-default"]);
  });

  test("traces: one SERVER span per request and one CLIENT span per lane, GenAI attribute names, the failed lane marked with its code, inside the request's time", () => {
    const { tracker, spans } = sinks();
    fellOver(tracker).release();
    const all = spans();
    const root = all.find((s) => s.kind === api.SpanKind.SERVER)!;
    expect(root.name).toBe("POST /v1/chat/completions");
    expect(root.attributes).toMatchObject({
      "http.request.method": "POST", "http.route": "/v1/chat/completions", "http.response.status_code": 200, "gateway.request_id": "req-7",
      "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 11, "gen_ai.usage.output_tokens": 7,
      "gateway.key_prefix": "gw_AbC1234", "gateway.served_by": "groq", "gateway.outcome": "ok",
    });
    const children: ReadableSpan[] = all.filter((s) => s.parentSpanContext?.spanId === root.spanContext().spanId);
    expect(children.map((c) => [c.kind, c.attributes["gen_ai.provider.name"], c.attributes["gateway.lane"]])).toEqual([
      [api.SpanKind.CLIENT, "openai", 0], [api.SpanKind.CLIENT, "groq", 1],
    ]);
    expect(children[0]!.attributes["error.type"]).toBe("http_503");
    expect(children[0]!.status.code).toBe(api.SpanStatusCode.ERROR);
    expect(children[1]!.attributes).toMatchObject({ "gen_ai.response.model": "llama-3.1-8b-instant", "gen_ai.usage.output_tokens": 7, "http.response.status_code": 200 });
    for (const c of children) {
      expect(ns(c.startTime)).toBeGreaterThanOrEqual(ns(root.startTime));
      expect(ns(c.endTime)).toBeLessThanOrEqual(ns(root.endTime));
    }
  });
});
