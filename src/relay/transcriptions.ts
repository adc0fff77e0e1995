// POST /v1/audio/transcriptions (CONTRACT §4): speech-to-text through the key's connected
// subscription sign-in. The multipart body is read whole (at most 25 MB), not parsed, and sent by
// the relay's one upstream executor (attempt.ts: upstream timeout, a record per attempt, lanes in
// order) to each lane adapter that transcribes; the answer is relayed. A key without a connected
// transcribing lane answers 400 unsupported_feature.
//
// Order of checks as on every inference path: 405 → key 401 → validation 400/413 (multipart
// body, a connected lane, size) → budget 402. The call is seat traffic (a usage record per
// attempt, endpoint "transcriptions"); the catalog prices tokens, not audio, so its cost is 0.
import type { RelayDeps } from "./relay-deps.ts";
import { GatewayError, unsupportedFeature } from "../errors.ts";
import type { Handler } from "../http/route.ts";
import { cappedStream, checkDeclaredLength } from "../http/body.ts";
import { getAdapter } from "../providers/registry.ts";
import type { ProviderAdapter, ResolvedLane } from "../providers/types.ts";
import { MIN_ESTIMATE_USD } from "../money/estimate.ts";
import { rateHeaders } from "./limits/headers.ts";
import { MoneyCall } from "../money/money.ts";
import { resolveRoutingKey, type KeyContext } from "./auth.ts";
import type { LaneResult, RelayRequest } from "./attempt.ts";
import { LaneRunner } from "./lane-runner.ts";

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

/** Reads the whole upload (at most `maxBytes`: 413 past it), so every lane can be sent it again. */
async function readUpload(body: ReadableStream<Uint8Array>, maxBytes: number): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  const reader = cappedStream(body, maxBytes).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(parts);
    parts.push(value);
  }
}

export function transcriptionsHandler(ctx: RelayDeps): Handler {
  return async (rc) => {
    const { request, requestId } = rc;
    rc.access.endpoint = "transcriptions";
    const key = await resolveRoutingKey(ctx, request);
    rc.access.keyPrefix = key.keyPrefix;
    const contentType = request.headers.get("content-type") ?? "";
    if (!/^multipart\/form-data;\s*boundary=/i.test(contentType) || !request.body) {
      throw invalid("Send the audio as multipart/form-data with a `file` part (and optionally `model`, `language`, `prompt`, `response_format`).");
    }
    // MAX_REQUEST_BYTES holds here as on every route (and never more than the upstream takes).
    const maxBytes = Math.min(MAX_AUDIO_BYTES, ctx.config.MAX_REQUEST_BYTES);
    checkDeclaredLength(request, maxBytes);
    if (!connectedSubLane(key)) {
      const why = key.lanes.some((l) => l.provider === "sub")
        ? "this key's sub lane has no connected subscription sign-in"
        : "this key has no sub lane";
      throw unsupportedFeature(`Audio transcription is served through a connected subscription sign-in, and ${why}. Connect one with POST /v1/organizations/sub-session and add a sub lane to the key.`);
    }
    const bytes = await readUpload(request.body, maxBytes);
    // Seat traffic counts toward the budget only when the key says so; then an exhausted budget refuses.
    // A transcription is one request toward rpm_limit and holds a concurrency lease; its tokens are unknown up front.
    const money = await MoneyCall.reserveFor(ctx, key, { requestId, endpoint: "transcriptions" },
      key.budgetExcludesSeats ? null : { usd: MIN_ESTIMATE_USD, minUsd: MIN_ESTIMATE_USD }, key.limits ? { requests: 1, tokens: 0 } : null)
      .catch((e: unknown) => {
        rc.access.noteRefusal("transcriptions", e);
        throw e;
      });
    if (money.rate) rc.headers = rateHeaders(money.rate.limits, money.rate.verdict);

    // The same executor as every upstream call (attempt.ts): the upstream timeout, a record per
    // attempt, and the key's transcribing lanes in order, a failed one moving on to the next.
    const rr: RelayRequest = {
      ctx, key, endpoint: "transcriptions", shape: "chat", body: {},
      // No prompt estimate from audio bytes: the catalog prices tokens, so an abandoned upload records 0.
      bytes: 0, stream: false, model: "", requestId, signal: request.signal, money, access: rc.access,
      upload: { contentType, accept: request.headers.get("accept") ?? "application/json", bytes },
    };
    const runner = new LaneRunner(rr, key.lanes.filter((l) => getAdapter(l.provider)?.transcribe));
    let r: LaneResult | null = null;
    try {
      r = await runner.next();
    } finally {
      money.settle();
      ctx.services.usageQueue.touchKey(key.id);
      const access = rc.access;
      access.outcome = r?.kind === "body" ? "ok" : r?.kind === "aborted" ? "aborted" : "error";
      access.provider = r?.kind === "body" ? r.attempt.provider : runner.lastProvider;
      access.ttfbMs = r?.kind === "body" ? r.attempt.ttfbMs : null;
    }
    if (r.kind === "body") return new Response(r.text, { status: r.status, headers: { "content-type": r.contentType } });
    if (r.kind === "aborted") return new Response(null, { status: 499 });
    if (r.kind === "client") throw r.error;
    throw new GatewayError(502, "The transcription got an answer the gateway cannot relay; retry the request.", { code: "upstream_error" });
  };
}
