// The OpenAI Chat Completions upstream codec. Chat is the pivot, so encoding and decoding are
// near-identity; what matters here is asking for usage on streams, reading it back, and the
// error classification shared by `openai` and the OpenAI-compatible vendors.
import { usageFromChat } from "../pivot.ts";
import type { ChatRequest, Json, UpstreamCodec } from "../types.ts";
import { chatErrorOf } from "./errors.ts";
import { chatStreamDecoder } from "./stream-decoder.ts";

/**
 * Shallow copy with `model` set and, on streams, usage requested (the relay reads it; the client
 * sees it only if it asked). A client that asked already keeps its own `stream_options` object, so
 * a pass-through body can go out as the client's text (wire-json.ts).
 */
function withModel(body: Json, model: string, stream: boolean): Json {
  const out: Json = { ...body, model };
  if (stream && body.stream_options?.include_usage !== true) out.stream_options = { ...(body.stream_options ?? {}), include_usage: true };
  return out;
}

export const chatUpstreamCodec: UpstreamCodec = {
  protocol: "chat",
  encodeRequest(req: ChatRequest, opts) {
    const out = withModel(req, opts.model, opts.stream);
    out.stream = opts.stream;
    return out;
  },
  passThroughRequest: (body, opts) => withModel(body, opts.model, opts.stream),
  decodeResponse(body) {
    return { completion: body, usage: usageFromChat(body.usage) };
  },
  streamDecoder: chatStreamDecoder,
  errorOf: chatErrorOf,
  usageOf: (body) => usageFromChat(body?.usage),
  isTerminal: (data) => data.trim() === "[DONE]",
  usageHolder: (event) => (event.usage && typeof event.usage === "object" ? event.usage : null),
  hideFromClient(event, request) {
    // The extra usage chunk (empty `choices`) exists only because the relay asked for it.
    return request.stream_options?.include_usage !== true && Array.isArray(event.choices) && event.choices.length === 0;
  },
};
