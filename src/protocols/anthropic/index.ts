// The Anthropic Messages codec: chat pivot ⇄ /v1/messages.
import type { Json, UpstreamCodec, Usage } from "../types.ts";
import { decodeAnthropicResponse, usageFromAnthropic } from "./decode-response.ts";
import { encodeAnthropicRequest } from "./encode-request.ts";
import { anthropicErrorOf } from "./errors.ts";
import { anthropicStreamDecoder } from "./stream-decoder.ts";

export { DEFAULT_MAX_TOKENS, JSON_TOOL_NAME } from "./encode-request.ts";

export const anthropicCodec: UpstreamCodec = {
  protocol: "anthropic",
  encodeRequest: encodeAnthropicRequest,
  decodeResponse: (body, opts) => decodeAnthropicResponse(body, opts),
  streamDecoder: anthropicStreamDecoder,
  errorOf: anthropicErrorOf,
  usageOf(body: Json): Usage | null {
    // A message, a message_start event ({message: {usage}}) or a message_delta event ({usage}).
    return usageFromAnthropic(body?.usage ?? body?.message?.usage);
  },
};
