// The Gemini API codec: chat pivot ⇄ generateContent / streamGenerateContent.
import type { Json, UpstreamCodec, Usage } from "../types.ts";
import { decodeGeminiResponse, usageFromGemini } from "./decode-response.ts";
import { encodeGeminiRequest } from "./encode-request.ts";
import { geminiErrorOf } from "./errors.ts";
import { geminiStreamDecoder } from "./stream-decoder.ts";

export { SKIP_THOUGHT_SIGNATURE } from "./encode-request.ts";

export const geminiCodec: UpstreamCodec = {
  protocol: "gemini",
  encodeRequest: encodeGeminiRequest,
  decodeResponse: (body, opts) => decodeGeminiResponse(body, opts),
  streamDecoder: geminiStreamDecoder,
  errorOf: geminiErrorOf,
  usageOf: (body: Json): Usage | null => usageFromGemini(body?.usageMetadata),
};
