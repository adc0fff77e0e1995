// The Gemini API shape, both ways:
// - geminiCodec: a lane that speaks Gemini (chat pivot → generateContent / streamGenerateContent
//   and back; and the pass-through usage reader when the client speaks Gemini too);
// - geminiClientCodec: a /v1beta client (CONTRACT §9) on a lane that speaks another protocol.
import type { ClientCodec, Json, UpstreamCodec, Usage } from "../types.ts";
import { decodeGeminiResponse, usageFromGemini } from "./decode-response.ts";
import { encodeGeminiRequest } from "./encode-request.ts";
import { geminiErrorOf } from "./errors.ts";
import { geminiFromPivot } from "./from-pivot.ts";
import { geminiStreamDecoder } from "./stream-decoder.ts";
import { geminiStreamEncoder } from "./stream-encoder.ts";
import { geminiToPivot } from "./to-pivot.ts";

export { SKIP_THOUGHT_SIGNATURE } from "./encode-request.ts";
export { sseToJsonArray } from "./json-array.ts";
export { geminiStreamError } from "./stream-encoder.ts";

/**
 * A Gemini client's body → the body a Gemini lane receives: the client's own members, without the
 * `model` and `stream` the route took from the URL (they go in the lane's URL). generationConfig
 * is a copy: fitting the output limit sets maxOutputTokens in it, and the client's own object is
 * never changed in place.
 */
export function geminiPassThroughBody(body: Json): Json {
  const { model: _m, stream: _s, ...rest } = body;
  if (rest.generationConfig && typeof rest.generationConfig === "object") rest.generationConfig = { ...rest.generationConfig };
  return rest;
}

/**
 * A Gemini client's countTokens body → what a Gemini lane's countTokens receives: `contents` as
 * sent, or a whole `generateContentRequest`, which names its model: the lane's.
 */
export function geminiCountBody(body: Json, model: string): Json {
  const rest = geminiPassThroughBody(body);
  const gcr = rest.generateContentRequest;
  if (gcr && typeof gcr === "object" && !Array.isArray(gcr)) rest.generateContentRequest = { ...gcr, model: `models/${model.replace(/^models\//, "")}` };
  return rest;
}

export const geminiCodec: UpstreamCodec = {
  protocol: "gemini",
  encodeRequest: encodeGeminiRequest,
  passThroughRequest: (body) => geminiPassThroughBody(body),
  decodeResponse: (body, opts) => decodeGeminiResponse(body, opts),
  streamDecoder: geminiStreamDecoder,
  errorOf: geminiErrorOf,
  usageOf: (body: Json): Usage | null => usageFromGemini(body?.usageMetadata),
  usageKey: "usageMetadata",
  // Gemini streams have no end marker: the last event is the one whose candidate carries its
  // finishReason (with the final usageMetadata), or Google's error object.
  isTerminal: (data) => /"finishReason"\s*:\s*"(?!FINISH_REASON_UNSPECIFIED")[A-Z_]+"/.test(data) || /^\s*\{\s*"error"\s*:/.test(data),
};

export const geminiClientCodec: ClientCodec = {
  shape: "gemini",
  toPivot: geminiToPivot,
  fromPivot: geminiFromPivot,
  streamEncoder: geminiStreamEncoder,
};
