// chat.completion.chunk objects → the Gemini streamGenerateContent event stream (alt=sse).
//
// Every event is a whole GenerateContentResponse holding the next parts of candidate 0: text as
// it arrives, the model's reasoning as `thought` parts when the client asked to see thoughts.
// Gemini sends a function call whole, never in pieces, so a tool call's argument fragments are
// gathered and its functionCall parts go out in one event once the choice finishes. The last
// event carries the finishReason and the usageMetadata: a Gemini client reads the end of the
// answer from it.
// Framed as Google frames it (`data: <json>\r\n\r\n`). A failure after the first event is an
// `{"error": {code, message, status}}` event, as Google's own streams end on one.
import { GatewayError, googleErrorObject } from "../../errors.ts";
import { firstChoice, writeDelta, type DeltaWriter } from "../chat/delta.ts";
import type { ChunkEncoder, Json, Usage } from "../types.ts";
import { functionCallPart, geminiFinishReason, newResponseId, usageMetadataOf } from "./from-pivot.ts";
import { includesThoughts } from "./to-pivot.ts";

const frame = (data: Json) => `data: ${JSON.stringify(data)}\r\n\r\n`;

/** The error event of a Gemini stream. */
export function geminiStreamError(message: string, cause?: GatewayError): string {
  return frame({ error: googleErrorObject(cause ? new GatewayError(cause.status, message, { code: cause.code }) : new GatewayError(500, message)) });
}

export function geminiStreamEncoder(request: Json): ChunkEncoder {
  const thoughts = includesThoughts(request);
  const responseId = newResponseId();
  let model = String(request.model ?? "");
  let closed = false;
  let finishReason: string | null = null;
  /** chat tool_call index → the call gathered so far. */
  const calls = new Map<number, { id: string; name: string; args: string }>();

  const event = (parts: Json[], end?: { finishReason: string; usage: Usage | null }): string => {
    const candidate: Json = { content: { role: "model", parts }, index: 0 };
    if (end) candidate.finishReason = end.finishReason;
    const out: Json = { candidates: [candidate] };
    if (end?.usage) out.usageMetadata = usageMetadataOf(end.usage);
    out.modelVersion = model;
    out.responseId = responseId;
    return frame(out);
  };

  let parts: Json[] = [];
  /** The gathered calls as functionCall parts, once (at the choice's finish, else in the last event). */
  const takeCalls = (): Json[] => {
    const out = [...calls.entries()].sort((a, b) => a[0] - b[0]).map(([, c]) => functionCallPart({ id: c.id, function: { name: c.name, arguments: c.args } }));
    calls.clear();
    return out;
  };
  const writer: DeltaWriter = {
    reasoning: (s) => {
      if (thoughts) parts.push({ text: s, thought: true });
      return "";
    },
    text: (s) => {
      parts.push({ text: s });
      return "";
    },
    refusal: (s) => {
      parts.push({ text: s });
      return "";
    },
    toolCall: (tc) => {
      const i = typeof tc.index === "number" ? tc.index : 0;
      let c = calls.get(i);
      if (!c) calls.set(i, (c = { id: "", name: "", args: "" }));
      if (typeof tc.id === "string" && tc.id) c.id = tc.id;
      if (typeof tc.function?.name === "string" && tc.function.name) c.name = tc.function.name;
      if (typeof tc.function?.arguments === "string") c.args += tc.function.arguments;
      return "";
    },
  };

  return {
    push(chunk: Json): string {
      if (closed) return "";
      if (typeof chunk.model === "string" && chunk.model) model = chunk.model;
      const choice = firstChoice(chunk);
      if (!choice) return "";
      parts = [];
      writeDelta(choice, writer);
      if (typeof choice.finish_reason === "string") {
        finishReason = choice.finish_reason;
        parts.push(...takeCalls());
      }
      return parts.length ? event(parts) : "";
    },
    end(usage: Usage | null): string {
      if (closed) return "";
      closed = true;
      const last = takeCalls();
      return event(last.length ? last : [{ text: "" }], { finishReason: geminiFinishReason(finishReason), usage });
    },
    error(message: string, cause?: GatewayError): string {
      if (closed) return "";
      closed = true;
      return geminiStreamError(message, cause);
    },
  };
}
