// Process and lane metrics on /metrics, and optional OpenTelemetry traces sent over OTLP/HTTP
// to a local receiver (a real HTTP server decoding the exporter's JSON). This gateway also runs
// with ACCESS_LOG=false, so the setting is checked here without starting another instance.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "../relay/fixtures.ts";
import { sample } from "../metrics/scrape.ts";

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
}

/** A local OTLP/HTTP collector: POST /v1/traces with the JSON encoding. */
function startOtlpReceiver() {
  const spans: OtlpSpan[] = [];
  let posts = 0;
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const url = new URL(req.url);
      if (req.method !== "POST" || url.pathname !== "/v1/traces") return new Response("not found", { status: 404 });
      if (!(req.headers.get("content-type") ?? "").includes("application/json")) return new Response("json only", { status: 415 });
      posts++;
      const body = (await req.json()) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> };
      for (const rs of body.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
      return Response.json({});
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, spans, posts: () => posts, stop: () => server.stop(true) };
}

const attr = (s: OtlpSpan, key: string) => {
  const v = s.attributes.find((a) => a.key === key)?.value;
  return v ? (v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.boolValue ?? v.doubleValue)) : undefined;
};

describe(`process and lane metrics, traces (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream, B: MockUpstream;
  let otlp: ReturnType<typeof startOtlpReceiver>;
  let key: { raw: string };

  beforeAll(async () => {
    otlp = startOtlpReceiver();
    [A, B] = await Promise.all([startMockOpenAI(), startMockOpenAI()]);
    gw = await startTestGateway({
      PROVIDER_OPENAI_BASE_URL: A.url, PROVIDER_GROQ_BASE_URL: B.url,
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, ACCESS_LOG: "false",
    });
    const acct = await createAccount(gw);
    const [ca, cb] = [await addCredential(gw, acct.id, "openai"), await addCredential(gw, acct.id, "groq")];
    key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", ca.id), lane("groq", cb.id)] });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await Promise.all([A, B].map((m) => m?.stop()));
    otlp?.stop();
  }, 60_000);

  test("a request that fell over: one SERVER span, one CLIENT span per lane with GenAI attribute names", async () => {
    A.setDefault({ status: 503 });
    B.setDefault({ content: "from B", prompt_tokens: 11, completion_tokens: 7 });
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
    expect(r.status).toBe(200);
    const id = r.headers.get("x-request-id")!;
    let root: OtlpSpan | undefined;
    for (let i = 0; i < 100 && !root; i++) {
      await Bun.sleep(50);
      root = otlp.spans.find((s) => attr(s, "gateway.request_id") === id);
    }
    expect(root).toBeDefined();
    expect(root!.kind).toBe(2); // SERVER
    expect(root!.name).toBe("POST /v1/chat/completions");
    expect(attr(root!, "gen_ai.request.model")).toBe("gpt-4o-mini");
    expect(attr(root!, "gen_ai.usage.input_tokens")).toBe(11);
    expect(attr(root!, "gen_ai.usage.output_tokens")).toBe(7);
    expect(attr(root!, "http.response.status_code")).toBe(200);
    const children = otlp.spans.filter((s) => s.parentSpanId === root!.spanId && s.traceId === root!.traceId);
    expect(children.map((c) => attr(c, "gen_ai.provider.name"))).toEqual(["openai", "groq"]);
    for (const c of children) {
      expect(c.kind).toBe(3); // CLIENT
      expect(attr(c, "gen_ai.operation.name")).toBe("chat");
      expect(attr(c, "gen_ai.request.model")).toBe("gpt-4o-mini");
      expect(BigInt(c.startTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(root!.startTimeUnixNano));
      expect(BigInt(c.endTimeUnixNano)).toBeLessThanOrEqual(BigInt(root!.endTimeUnixNano));
    }
    expect(attr(children[0]!, "error.type")).toBeDefined();
    expect(attr(children[0]!, "http.response.status_code")).toBe(503);
    expect(attr(children[1]!, "gen_ai.usage.output_tokens")).toBe(7);
    expect(attr(children[1]!, "error.type")).toBeUndefined();
  });

  test("ACCESS_LOG=false: no access line is written, the request id is still returned", async () => {
    const r = await gw.req("/healthz");
    expect(r.headers.get("x-request-id")).toBeTruthy();
    const lines = gw.logs.flatMap((c) => c.split("\n")).filter(Boolean).map((l) => JSON.parse(l));
    expect(lines.filter((l) => l.log === "access")).toEqual([]);
  });

  test("/metrics: process collectors, per-lane upstream latency and TTFB, in-flight requests and streams", async () => {
    A.setDefault({ status: 500 });
    B.setDefault({ content: "slow stream", chunks: 4, chunk_delay_ms: 150 });
    const streaming = gw.req("/v1/chat/completions", { token: key.raw, body: chatBody({ stream: true }) });
    const res = await streaming;
    expect(res.status).toBe(200);
    const during = await (await gw.req("/metrics")).text();
    // The stream is open, and so is its request (the scrape itself is one more request in flight).
    expect(sample(during, "gateway_streams_in_flight")).toBe(1);
    expect(sample(during, "gateway_requests_in_flight")).toBe(2);
    await res.text();
    await Bun.sleep(20);
    const text = await (await gw.req("/metrics")).text();
    expect(sample(text, "gateway_streams_in_flight")).toBe(0);
    expect(sample(text, "gateway_requests_in_flight")).toBe(1);
    for (const name of ["process_cpu_seconds_total", "process_resident_memory_bytes", "nodejs_eventloop_lag_seconds", "nodejs_active_handles_total"]) {
      expect(sample(text, name)).toBeGreaterThanOrEqual(0);
    }
    expect(sample(text, "gateway_upstream_duration_seconds_count", { provider: "openai", outcome: "error" })).toBeGreaterThanOrEqual(2);
    expect(sample(text, "gateway_upstream_duration_seconds_count", { provider: "groq", outcome: "ok" })).toBeGreaterThanOrEqual(2);
    expect(sample(text, "gateway_upstream_time_to_first_byte_seconds_count", { provider: "groq", outcome: "ok" })).toBeGreaterThanOrEqual(2);
    // The Grafana dashboard in docs/ reads only series this endpoint exports.
    const dashboard = await Bun.file(new URL("../../docs/grafana-dashboard.json", import.meta.url)).text();
    const used = new Set([...dashboard.matchAll(/\b((?:gateway|process|nodejs)_[a-z0-9_]+)/g)].map((m) => m[1]!.replace(/_bucket$/, "")));
    expect(used.size).toBeGreaterThan(10);
    for (const name of used) expect(text).toContain(`# TYPE ${name} `);
  });
});
