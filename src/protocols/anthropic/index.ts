// The Anthropic Messages shape, both ways:
// - anthropicCodec: a lane that speaks Messages (chat pivot → /v1/messages and back; and the
//   pass-through usage reader when the client speaks Messages too);
// - anthropicClientCodec: a /v1/messages client on a lane that speaks another protocol.
import type { ClientCodec, EncodeOptions, Json, UpstreamCodec, Usage } from "../types.ts";
import { movedSystemTurns } from "./system-turns.ts";
import { decodeAnthropicResponse, oneHourWrites, usageFromAnthropic } from "./decode-response.ts";
import { encodeAnthropicRequest } from "./encode-request.ts";
import { anthropicErrorOf } from "./errors.ts";
import { anthropicFromPivot } from "./from-pivot.ts";
import { anthropicStreamDecoder } from "./stream-decoder.ts";
import { anthropicStreamEncoder } from "./stream-encoder.ts";
import { anthropicToPivot } from "./to-pivot.ts";

export { DEFAULT_MAX_TOKENS, JSON_TOOL_NAME } from "./encode-request.ts";
export { anthropicStreamError } from "./stream-encoder.ts";

/**
 * Usage of a pass-through stream so far, after one event: message_start carries the input side,
 * message_delta the cumulative output (and, on newer API versions, input totals that win).
 */
function streamUsage(prev: Usage | null, ev: Json): Usage | null {
  if (ev?.type === "message_start") return usageFromAnthropic(ev.message?.usage) ?? prev;
  const x = ev?.usage;
  if (!x || typeof x !== "object") return prev;
  const cacheRead = typeof x.cache_read_input_tokens === "number" ? x.cache_read_input_tokens : prev?.cached_tokens ?? 0;
  const cacheWrite = typeof x.cache_creation_input_tokens === "number" ? x.cache_creation_input_tokens : prev?.cache_write_tokens ?? 0;
  const input = typeof x.input_tokens === "number" ? x.input_tokens : prev ? prev.prompt_tokens - prev.cached_tokens - prev.cache_write_tokens : 0;
  const out: Usage = {
    prompt_tokens: input + cacheRead + cacheWrite,
    completion_tokens: typeof x.output_tokens === "number" ? x.output_tokens : prev?.completion_tokens ?? 0,
    cached_tokens: cacheRead,
    cache_write_tokens: cacheWrite,
  };
  const h1 = x.cache_creation ? oneHourWrites(x) : prev?.cache_write_1h_tokens ?? null;
  if (h1) out.cache_write_1h_tokens = h1;
  return out;
}

export const anthropicCodec: UpstreamCodec = {
  protocol: "anthropic",
  encodeRequest: encodeAnthropicRequest,
  // A Messages client on a Messages lane: the body goes as it is (the lane's model set when it
  // differs). Anthropic streams always report usage, so nothing needs asking for. Under adapt,
  // `system` turns inside `messages` (which Anthropic refuses) move into `system`.
  passThroughRequest(body: Json, opts: EncodeOptions): Json {
    const out = body.model === opts.model ? body : { ...body, model: opts.model };
    return opts.adapt?.adapting ? movedSystemTurns(out, body, opts.adapt) : out;
  },
  decodeResponse: (body, opts) => decodeAnthropicResponse(body, opts),
  streamDecoder: anthropicStreamDecoder,
  errorOf: anthropicErrorOf,
  usageOf(body: Json): Usage | null {
    // A message, a message_start event ({message: {usage}}) or a message_delta event ({usage}).
    return usageFromAnthropic(body?.usage ?? body?.message?.usage);
  },
  streamUsage,
  // message_start's usage is the input side only; message_delta's is the answer's whole.
  usageHolder: (event) => (event.type === "message_delta" && event.usage && typeof event.usage === "object" ? event.usage : null),
  // message_stop ends a Messages stream; an `error` event is the upstream's own end.
  isTerminal: (data) => /"type"\s*:\s*"(?:message_stop|error)"/.test(data),
};

export const anthropicClientCodec: ClientCodec = {
  shape: "anthropic",
  toPivot: anthropicToPivot,
  fromPivot: anthropicFromPivot,
  streamEncoder: anthropicStreamEncoder,
  // The API version and beta features the client asked for mean something only to Anthropic.
  forwardHeaders: ["anthropic-version", "anthropic-beta"],
  fieldNames: { reasoning_effort: "thinking", user: "metadata.user_id", stop: "stop_sequences" },
};
