// POST /v1/audio/transcriptions (CONTRACT §4): speech-to-text through the key's connected
// subscription sign-in. The multipart body is streamed, not parsed, to the lane adapter's
// transcribe() (the sub provider's `/audio/transcriptions` with the sign-in's auth headers), and
// the answer is relayed. A key without a connected `sub` lane answers 400 unsupported_feature.
//
// Order of checks as on every inference path: 405 → key 401 → validation 400 (multipart body,
// a connected sub lane) → budget 402. The call is seat traffic (one usage record, endpoint
// "transcriptions"); the pricing catalog prices tokens, not audio, so its cost is recorded as 0.
import type { Elysia } from "elysia";
import type { Ctx } from "../context.ts";
import { GatewayError, unsupportedFeature } from "../errors.ts";
import { INFERENCE, mount, type Handler } from "../http/route.ts";
import { cappedStream, checkDeclaredLength } from "../http/body.ts";
import { chatErrorOf } from "../protocols/chat/errors.ts";
import { getAdapter } from "../providers/registry.ts";
import type { ProviderAdapter, ResolvedLane } from "../providers/types.ts";
import { MIN_ESTIMATE_USD } from "./budget/estimate.ts";
import { RATE_LIMITED_DOC, rateHeaders } from "./limits/headers.ts";
import { MoneyCall } from "./budget/money.ts";
import { resolveRoutingKey, type KeyContext } from "./auth.ts";

/** The transcription's cost: the catalog prices tokens, not audio, so it is recorded as 0 (seat traffic). */
const SEAT = { id: "sub", seat: true } as const;

/** The transcription upload limit (the subscription's own limit for one audio file). */
export const MAX_AUDIO_BYTES = 25 * 1024 * 1024;

const invalid = (message: string) => new GatewayError(400, message, { type: "invalid_request_error" });

/** The key's first lane whose provider transcribes (the `sub` lane) and that can serve now, or null. */
export function connectedSubLane(key: KeyContext): { lane: ResolvedLane; adapter: ProviderAdapter & Required<Pick<ProviderAdapter, "transcribe">> } | null {
  for (const lane of key.lanes) {
    const adapter = getAdapter(lane.provider);
    if (adapter?.transcribe && adapter.unavailable(lane) === null) return { lane, adapter: adapter as ProviderAdapter & Required<Pick<ProviderAdapter, "transcribe">> };
  }
  return null;
}

function transcriptionsHandler(ctx: Ctx): Handler {
  return async (rc) => {
    const { request, requestId } = rc;
    const key = await resolveRoutingKey(ctx, request);
    const contentType = request.headers.get("content-type") ?? "";
    if (!/^multipart\/form-data;\s*boundary=/i.test(contentType) || !request.body) {
      throw invalid("Send the audio as multipart/form-data with a `file` part (and optionally `model`, `language`, `prompt`, `response_format`).");
    }
    // MAX_REQUEST_BYTES holds here as on every route (and never more than the upstream takes).
    const maxBytes = Math.min(MAX_AUDIO_BYTES, ctx.config.MAX_REQUEST_BYTES);
    checkDeclaredLength(request, maxBytes);
    const found = connectedSubLane(key);
    if (!found) {
      const why = key.lanes.some((l) => l.provider === "sub")
        ? "this key's sub lane has no connected subscription sign-in"
        : "this key has no sub lane";
      throw unsupportedFeature(`Audio transcription is served through a connected subscription sign-in, and ${why}. Connect one with POST /v1/organizations/sub-session and add a sub lane to the key.`);
    }
    // Seat traffic counts toward the budget only when the key says so; then an exhausted budget refuses.
    // A transcription is one request toward rpm_limit and holds a concurrency lease; its tokens are unknown up front.
    const money = await MoneyCall.reserveFor(ctx, key, { requestId, endpoint: "transcriptions" },
      key.budgetExcludesSeats ? null : { usd: MIN_ESTIMATE_USD, minUsd: MIN_ESTIMATE_USD }, key.limits ? { requests: 1, tokens: 0 } : null);
    if (money.rate) rc.headers = rateHeaders(money.rate.limits, money.rate.verdict);
    const { lane, adapter } = found;

    // The body is streamed once; a copy is kept only for the single retry after a token refresh.
    const body = cappedStream(request.body, maxBytes);
    let spare: ReadableStream<Uint8Array> | null = null;
    let sends = 0;
    const nextBody = () => {
      if (sends++ === 0) {
        const [a, b] = body.tee();
        spare = b;
        return a;
      }
      const s = spare!;
      spare = null;
      return s;
    };

    const started = Date.now();
    const record = (status: number, outcome: "ok" | "error" | "aborted", errorCode: string | null) => {
      const latencyMs = Date.now() - started;
      money.record({ adapter: SEAT, provider: "sub", laneIndex: lane.index, model: null, status, outcome, errorCode, usage: null, latencyMs, ttfbMs: latencyMs });
      money.settle();
      ctx.services.usageQueue.touchKey(key.id);
      ctx.services.relayObserver.requestDone({ endpoint: "transcriptions", provider: "sub", outcome, status, latencyMs, ttfbMs: latencyMs });
    };

    let res: Response;
    try {
      res = await adapter.transcribe(ctx, lane, {
        contentType,
        accept: request.headers.get("accept") ?? "application/json",
        body: nextBody,
        signal: request.signal,
      });
    } catch (e) {
      const s = spare as ReadableStream<Uint8Array> | null;
      await s?.cancel().catch(() => {});
      if (e instanceof GatewayError && e.status === 413) { record(413, "error", "request_too_large"); throw e; }
      if (request.signal.aborted) { record(0, "aborted", "client_closed"); throw e; }
      record(0, "error", e instanceof GatewayError ? e.code ?? "upstream_error" : "connection_error");
      if (e instanceof GatewayError) throw new GatewayError(502, e.message, { code: "upstream_error" });
      throw new GatewayError(502, "The subscription backend could not be reached for the transcription. Retry in a moment.", { code: "upstream_error" });
    }
    const s = spare as ReadableStream<Uint8Array> | null;
    await s?.cancel().catch(() => {});

    if (res.ok) {
      record(res.status, "ok", null);
      const headers: Record<string, string> = { "content-type": res.headers.get("content-type") ?? "application/json" };
      return new Response(res.body, { status: res.status, headers });
    }
    const text = await res.text().catch(() => "");
    const info = chatErrorOf(res.status, text);
    record(res.status, "error", info.code ?? "upstream_error");
    if (res.status >= 400 && res.status < 500 && res.status !== 401 && res.status !== 403 && res.status !== 429) {
      // The upstream says the request itself is wrong (bad file, unknown model): the client can fix it.
      throw new GatewayError(res.status, `The subscription backend refused the transcription: ${info.message}`, { code: info.code ?? "upstream_error", type: "invalid_request_error" });
    }
    throw new GatewayError(502, `The subscription backend answered ${res.status} to the transcription: ${info.message}`, { code: "upstream_error" });
  };
}

/** Mounts POST /v1/audio/transcriptions (other methods: 405 without code). */
export function transcriptionRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/audio/transcriptions", { POST: transcriptionsHandler(ctx) }, INFERENCE, {
    POST: {
      summary: "Transcribe audio (through the subscription lane)", tag: "Inference", auth: "routing-key",
      rawBody: { contentType: "multipart/form-data", schema: { type: "object", required: ["file"], properties: { file: { type: "string", contentMediaType: "application/octet-stream" }, model: { type: "string" } } } },
      responses: { "200": { description: "The transcription, as the upstream answered it." }, ...RATE_LIMITED_DOC },
    },
  });
}
