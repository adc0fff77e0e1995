// chat.completion.chunk objects → the Responses event stream.
//
// response.created, response.in_progress; then per output item: response.output_item.added,
// (message) response.content_part.added + response.output_text.delta…, (function call)
// response.function_call_arguments.delta…; at the end each open item is closed in order
// (output_text.done, content_part.done / function_call_arguments.done, output_item.done) and
// response.completed (or response.incomplete) carries the final Response with usage. A call of a
// tool the client declared as `custom` (tool-map.ts) is a custom_tool_call item instead: its input
// is the call's `input` argument, which is only whole once the arguments are, so it is written
// in one response.custom_tool_call_input.delta when the item closes.
// Every event has `type` and an increasing `sequence_number`, framed with an `event:` line.
import { nestedErrorObject, type GatewayError } from "../../errors.ts";
import { firstChoice, writeDelta, type DeltaWriter } from "../chat/delta.ts";
import { writeSseJson } from "../sse.ts";
import type { ChunkEncoder, Json, ReasoningEnd, Usage } from "../types.ts";
import { clientCallItem, customInput, toolMapOf, type ToolMap } from "./tool-map.ts";
import { callItem, newCustomCallItemId, newFunctionItemId, newMessageItemId, newReasoningItemId, newResponseId, outputTextPart, reasoningItem, responseSkeleton, statusOf } from "./from-pivot.ts";
import { responsesUsage } from "./usage.ts";

interface MessageItem {
  kind: "message";
  id: string;
  outputIndex: number;
  text: string;
  refusal: string;
  /** content_index of the output_text / refusal part once opened. */
  textPart: number | null;
  refusalPart: number | null;
}
interface ReasoningItemState {
  kind: "reasoning";
  id: string;
  outputIndex: number;
  parts: string[];
  /** The summary part being written, if one is open. */
  partOpen: boolean;
  encrypted?: string;
  done: boolean;
}
interface CallItem {
  kind: "call";
  id: string;
  outputIndex: number;
  callId: string;
  name: string;
  arguments: string;
  /** A call of a custom tool: a custom_tool_call item. */
  custom: boolean;
}

export function responsesStreamEncoder(request: Json, opts: { nextSequence?: number } = {}): ChunkEncoder {
  let seq = opts.nextSequence ?? 0;
  let response: Json | null = null;
  let finishReason: string | null = null;
  let closed = false;
  const items: (MessageItem | CallItem | ReasoningItemState)[] = [];
  let message: MessageItem | null = null;
  let reasoningOpen: ReasoningItemState | null = null;
  const calls = new Map<number, CallItem>();
  // The way back to the client's tool names (tool-map.ts), looked up at the first call.
  let toolMap: ToolMap | null | undefined;

  const emit = (type: string, fields: Json): string => writeSseJson({ type, sequence_number: seq++, ...fields });

  const open = (chunk: Json | null): string => {
    if (response) return "";
    const created = typeof chunk?.created === "number" ? chunk.created : Math.floor(Date.now() / 1000);
    response = responseSkeleton(request, newResponseId(), typeof chunk?.model === "string" ? chunk.model : String(request.model ?? ""), created);
    return emit("response.created", { response: { ...response } }) + emit("response.in_progress", { response: { ...response } });
  };

  // Reasoning: an item of summary parts, written before the answer and closed as soon as it ends.
  const openReasoning = (): ReasoningItemState => {
    if (reasoningOpen) return reasoningOpen;
    reasoningOpen = { kind: "reasoning", id: newReasoningItemId(), outputIndex: items.length, parts: [], partOpen: false, done: false };
    items.push(reasoningOpen);
    pending += emit("response.output_item.added", { output_index: reasoningOpen.outputIndex, item: reasoningItem(reasoningOpen.id, [], undefined) });
    return reasoningOpen;
  };
  let pending = "";
  const flush = (): string => {
    const s = pending;
    pending = "";
    return s;
  };
  const reasoning = (delta: string): string => {
    const r = openReasoning();
    const summary_index = r.partOpen ? r.parts.length - 1 : r.parts.length;
    if (!r.partOpen) {
      r.parts.push("");
      r.partOpen = true;
      pending += emit("response.reasoning_summary_part.added", { item_id: r.id, output_index: r.outputIndex, summary_index, part: { type: "summary_text", text: "" } });
    }
    r.parts[summary_index] += delta;
    return flush() + emit("response.reasoning_summary_text.delta", { item_id: r.id, output_index: r.outputIndex, summary_index, delta });
  };
  const endPart = (r: ReasoningItemState): string => {
    if (!r.partOpen) return "";
    r.partOpen = false;
    const summary_index = r.parts.length - 1;
    const text = r.parts[summary_index]!;
    return emit("response.reasoning_summary_text.done", { item_id: r.id, output_index: r.outputIndex, summary_index, text })
      + emit("response.reasoning_summary_part.done", { item_id: r.id, output_index: r.outputIndex, summary_index, part: { type: "summary_text", text } });
  };
  const closeReasoning = (): string => {
    const r = reasoningOpen;
    if (!r) return "";
    reasoningOpen = null;
    r.done = true;
    return endPart(r) + emit("response.output_item.done", { output_index: r.outputIndex, item: doneItem(r) });
  };
  const reasoningEnd = (end: ReasoningEnd): string => {
    if (typeof end.redacted === "string") return ""; // Anthropic's redacted reasoning has no Responses form
    const r = openReasoning();
    let s = flush() + endPart(r);
    if (end.more) return s;
    if (end.encrypted_content !== undefined) r.encrypted = end.encrypted_content;
    return s + closeReasoning();
  };

  const ensureMessage = (): string => {
    if (message) return "";
    message = { kind: "message", id: newMessageItemId(), outputIndex: items.length, text: "", refusal: "", textPart: null, refusalPart: null };
    items.push(message);
    return emit("response.output_item.added", { output_index: message.outputIndex, item: { id: message.id, type: "message", status: "in_progress", role: "assistant", content: [] } });
  };
  const partCount = (m: MessageItem) => (m.textPart !== null ? 1 : 0) + (m.refusalPart !== null ? 1 : 0);

  const text = (delta: string): string => {
    let s = ensureMessage();
    const m = message!;
    if (m.textPart === null) {
      m.textPart = partCount(m);
      s += emit("response.content_part.added", { item_id: m.id, output_index: m.outputIndex, content_index: m.textPart, part: outputTextPart("") });
    }
    m.text += delta;
    return s + emit("response.output_text.delta", { item_id: m.id, output_index: m.outputIndex, content_index: m.textPart, delta, logprobs: [] });
  };
  const refusal = (delta: string): string => {
    let s = ensureMessage();
    const m = message!;
    if (m.refusalPart === null) {
      m.refusalPart = partCount(m);
      s += emit("response.content_part.added", { item_id: m.id, output_index: m.outputIndex, content_index: m.refusalPart, part: { type: "refusal", refusal: "" } });
    }
    m.refusal += delta;
    return s + emit("response.refusal.delta", { item_id: m.id, output_index: m.outputIndex, content_index: m.refusalPart, delta });
  };
  const toolCall = (tc: Json): string => {
    const index = typeof tc.index === "number" ? tc.index : 0;
    let s = "";
    let c = calls.get(index);
    if (!c) {
      if (toolMap === undefined) toolMap = toolMapOf(request);
      const name = String(tc.function?.name ?? "");
      const custom = toolMap?.byLaneName.get(name)?.kind === "custom";
      c = { kind: "call", id: custom ? newCustomCallItemId() : newFunctionItemId(), outputIndex: items.length, callId: String(tc.id ?? ""), name, arguments: "", custom };
      calls.set(index, c);
      items.push(c);
      s += emit("response.output_item.added", { output_index: c.outputIndex, item: callItem(toolMap ?? null, c.id, "in_progress", c.callId, c.name, "") });
    }
    const delta = tc.function?.arguments;
    if (typeof delta === "string" && delta) {
      c.arguments += delta;
      if (!c.custom) s += emit("response.function_call_arguments.delta", { item_id: c.id, output_index: c.outputIndex, delta });
    }
    return s;
  };

  const messageContent = (m: MessageItem): Json[] => {
    const parts: Json[] = [];
    if (m.textPart !== null) parts[m.textPart] = outputTextPart(m.text);
    if (m.refusalPart !== null) parts[m.refusalPart] = { type: "refusal", refusal: m.refusal };
    return parts;
  };
  function doneItem(it: MessageItem | CallItem | ReasoningItemState): Json {
    if (it.kind === "reasoning") return reasoningItem(it.id, it.parts, it.encrypted);
    return it.kind === "message"
      ? { id: it.id, type: "message", status: "completed", role: "assistant", content: messageContent(it) }
      : callItem(toolMap ?? null, it.id, "completed", it.callId, it.name, it.arguments);
  }

  const closeItems = (): string => {
    let s = "";
    s += closeReasoning();
    for (const it of items) {
      if (it.kind === "reasoning") continue; // closed when it ended (closeReasoning)
      if (it.kind === "message") {
        if (it.textPart !== null) {
          s += emit("response.output_text.done", { item_id: it.id, output_index: it.outputIndex, content_index: it.textPart, text: it.text, logprobs: [] });
          s += emit("response.content_part.done", { item_id: it.id, output_index: it.outputIndex, content_index: it.textPart, part: outputTextPart(it.text) });
        }
        if (it.refusalPart !== null) {
          s += emit("response.refusal.done", { item_id: it.id, output_index: it.outputIndex, content_index: it.refusalPart, refusal: it.refusal });
          s += emit("response.content_part.done", { item_id: it.id, output_index: it.outputIndex, content_index: it.refusalPart, part: { type: "refusal", refusal: it.refusal } });
        }
      } else if (it.custom) {
        const input = customInput(it.arguments);
        if (input) s += emit("response.custom_tool_call_input.delta", { item_id: it.id, output_index: it.outputIndex, delta: input });
        s += emit("response.custom_tool_call_input.done", { item_id: it.id, output_index: it.outputIndex, input });
      } else {
        const item = clientCallItem(toolMap ?? null, it.callId, it.name, it.arguments);
        s += emit("response.function_call_arguments.done", { item_id: it.id, output_index: it.outputIndex, name: item.name, arguments: it.arguments });
      }
      s += emit("response.output_item.done", { output_index: it.outputIndex, item: doneItem(it) });
    }
    return s;
  };

  // The answer's first text or call ends any reasoning still open.
  const writer: DeltaWriter = {
    reasoning,
    reasoningEnd,
    text: (d) => closeReasoning() + text(d),
    refusal: (d) => closeReasoning() + refusal(d),
    toolCall: (tc) => closeReasoning() + toolCall(tc),
  };
  return {
    push(chunk: Json): string {
      if (closed) return "";
      let s = open(chunk);
      const choice = firstChoice(chunk);
      if (!choice) return s; // a usage-only chunk: usage arrives through end()
      s += writeDelta(choice, writer);
      if (typeof choice.finish_reason === "string") finishReason = choice.finish_reason;
      return s;
    },
    end(usage: Usage | null): string {
      if (closed) return "";
      closed = true;
      let s = open(null) + closeItems();
      const { status, incomplete_details } = statusOf(finishReason);
      const final = { ...response!, status, incomplete_details, output: items.map(doneItem), ...(usage ? { usage: responsesUsage(usage) } : {}) };
      s += emit(status === "completed" ? "response.completed" : "response.incomplete", { response: final });
      return s;
    },
    error(messageText: string, cause?: GatewayError): string {
      if (closed) return "";
      closed = true;
      const what = cause ? nestedErrorObject(cause) : { code: "upstream_error", param: null };
      let s = emit("error", { code: what.code, message: messageText, param: what.param });
      // The stream this encoder wrote also gets its terminal state; an encoder that wrote nothing
      // (an error after pass-through bytes, or before any content) adds only the error event.
      if (response) {
        const failed = { ...(response as Json), status: "failed", error: { code: "server_error", message: messageText }, output: items.map(doneItem) };
        s += emit("response.failed", { response: failed });
      }
      return s;
    },
  };
}
