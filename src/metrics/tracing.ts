// Optional OpenTelemetry traces. With OTEL_EXPORTER_OTLP_ENDPOINT set, every finished request
// becomes one SERVER span with one CLIENT span per lane it tried, exported over OTLP/HTTP (JSON).
// Unset, none of the OpenTelemetry packages is loaded (dynamic imports below) and the request path
// pays nothing. Spans are built after the request ended from its access record (start and end
// times included), so the relay carries no span objects and no context propagation.
// Attribute names follow the OpenTelemetry GenAI semantic conventions: gen_ai.provider.name (and
// the older gen_ai.system for backends that still read it), gen_ai.operation.name,
// gen_ai.request.model, gen_ai.response.model, gen_ai.usage.input_tokens / output_tokens.
import type { Ctx } from "../context.ts";
import type { AccessEntry } from "../http/access-log.ts";

type Api = typeof import("@opentelemetry/api");
type Tracer = import("@opentelemetry/api").Tracer;

/** Where spans go: the OTLP/HTTP traces path under the collector's base address. */
export function tracesUrl(endpoint: string): string {
  return `${endpoint.replace(/\/+$/, "")}/v1/traces`;
}

const OPERATION: Record<string, string> = {
  "/v1/chat/completions": "chat",
  "/v1/responses": "chat",
};

export function recordSpans(api: Api, tracer: Tracer, e: AccessEntry): void {
  // performance.now() → wall clock, anchored at the request's start.
  const wall = (t: number) => e.startedAtEpochMs + (t - e.startedAt);
  const root = tracer.startSpan(`${e.method} ${e.route}`, {
    kind: api.SpanKind.SERVER,
    startTime: e.startedAtEpochMs,
    attributes: {
      "http.request.method": e.method,
      "http.route": e.route,
      "http.response.status_code": e.status,
      "gateway.request_id": e.requestId,
    },
  });
  if (e.model !== null) {
    root.setAttribute("gen_ai.operation.name", OPERATION[e.route] ?? "chat");
    root.setAttribute("gen_ai.request.model", e.model);
  }
  if (e.inputTokens || e.outputTokens) {
    root.setAttribute("gen_ai.usage.input_tokens", e.inputTokens);
    root.setAttribute("gen_ai.usage.output_tokens", e.outputTokens);
  }
  if (e.keyPrefix !== null) root.setAttribute("gateway.key_prefix", e.keyPrefix);
  if (e.served !== null) root.setAttribute("gateway.served_by", e.served);
  if (e.outcome !== null) root.setAttribute("gateway.outcome", e.outcome);
  if (e.status >= 500) root.setStatus({ code: api.SpanStatusCode.ERROR });
  const parent = api.trace.setSpan(api.context.active(), root);
  for (const l of e.lanes ?? []) {
    const operation = OPERATION[e.route] ?? "chat";
    const span = tracer.startSpan(`${operation} ${l.model ?? e.model ?? ""}`.trim(), {
      kind: api.SpanKind.CLIENT,
      startTime: wall(l.startedAt),
      attributes: {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": l.provider,
        "gen_ai.system": l.provider,
        "gateway.lane": l.lane,
      },
    }, parent);
    if (e.model !== null) span.setAttribute("gen_ai.request.model", e.model);
    if (l.model) span.setAttribute("gen_ai.response.model", l.model);
    if (l.status) span.setAttribute("http.response.status_code", l.status);
    if (l.inputTokens !== undefined) span.setAttribute("gen_ai.usage.input_tokens", l.inputTokens);
    if (l.outputTokens !== undefined) span.setAttribute("gen_ai.usage.output_tokens", l.outputTokens);
    if (l.code) {
      span.setAttribute("error.type", l.code);
      span.setStatus({ code: api.SpanStatusCode.ERROR, message: l.code });
    }
    span.end(wall(l.endedAt ?? e.endedAt));
  }
  root.end(wall(e.endedAt));
}

/** Turns tracing on when OTEL_EXPORTER_OTLP_ENDPOINT is set; otherwise loads nothing. */
export async function installTracing(ctx: Ctx): Promise<boolean> {
  const endpoint = ctx.config.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint) return false;
  const [api, sdk, otlp, resources] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/sdk-trace-base"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/resources"),
  ]);
  const provider = new sdk.BasicTracerProvider({
    resource: resources.resourceFromAttributes({ "service.name": ctx.config.OTEL_SERVICE_NAME }),
    spanProcessors: [new sdk.BatchSpanProcessor(new otlp.OTLPTraceExporter({ url: tracesUrl(endpoint) }), { scheduledDelayMillis: 1000 })],
  });
  const tracer = provider.getTracer("model-gateway");
  ctx.services.requestTracker.addSink((e) => recordSpans(api, tracer, e));
  // On shutdown the spans still buffered are sent before the process exits.
  ctx.onShutdown(() => provider.shutdown().catch((err: unknown) => ctx.log.warn({ err: err instanceof Error ? err.message : String(err) }, "trace export at shutdown failed")));
  ctx.log.info({ endpoint: tracesUrl(endpoint) }, "tracing on: OTLP/HTTP");
  return true;
}
