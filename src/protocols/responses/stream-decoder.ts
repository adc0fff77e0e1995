// A Responses event stream (from a Responses-only lane) → chat.completion.chunk objects.
//
// response.created → role chunk; output_item.added(function_call) → a tool_calls entry with
// call_id and name; function_call_arguments.delta → that call's arguments (matched by item_id);
// output_text.delta → content; refusal.delta → refusal; response.completed / .incomplete →
// finish chunk and usage; response.failed and `error` throw UpstreamStreamError.
import { chatChunk, roleChunkOnce, streamEventJson, vendorText, type ChunkBase } from "../pivot.ts";
import { UpstreamStreamError, type ChunkDecoder, type Json, type SseEvent, type Usage } from "../types.ts";
import { finishReasonOf } from "./decode-response.ts";
import { responsesErrorRetryable } from "./errors.ts";
import { usageFromResponses } from "./usage.ts";

interface CallState {
  toolIndex: number;
  argsSent: boolean;
}

export function responsesStreamDecoder(opts: { model: string; id: string; created: number }): ChunkDecoder {
  const base: ChunkBase = { id: opts.id, model: opts.model, created: opts.created };
  const calls = new Map<string, CallState>();
  /** Reasoning items whose first summary part has been seen. */
  const reasoningParts = new Set<string>();
  let finished = false;
  let usage: Usage | null = null;

  const start = roleChunkOnce(base);
  const callFor = (item: Json, out: Json[]): CallState => {
    const key = String(item.id ?? item.call_id);
    let c = calls.get(key);
    if (!c) {
      c = { toolIndex: calls.size, argsSent: false };
      calls.set(key, c);
      out.push(chatChunk(base, { tool_calls: [{ index: c.toolIndex, id: String(item.call_id ?? item.id), type: "function", function: { name: String(item.name ?? ""), arguments: "" } }] }));
    }
    return c;
  };
  const fullArguments = (c: CallState, args: unknown, out: Json[]) => {
    if (c.argsSent || typeof args !== "string" || !args) return;
    c.argsSent = true;
    out.push(chatChunk(base, { tool_calls: [{ index: c.toolIndex, function: { arguments: args } }] }));
  };
  const finish = (r: Json): Json[] => {
    if (finished) return [];
    finished = true;
    if (typeof r?.model === "string" && r.model) base.model = r.model;
    usage = usageFromResponses(r?.usage) ?? usage;
    return [...start(), chatChunk(base, {}, finishReasonOf(r?.status, r?.incomplete_details?.reason, calls.size > 0))];
  };

  return {
    push(ev: SseEvent): Json[] {
      const d = streamEventJson(ev, "Responses");
      const type = typeof d.type === "string" ? d.type : ev.event;
      const out: Json[] = [];
      switch (type) {
        case "response.created":
        case "response.in_progress":
          if (typeof d.response?.model === "string" && d.response.model) base.model = d.response.model;
          // The role chunk waits for content, so an error before any content can still fail over.
          return [];
        case "response.reasoning_summary_part.added":
          // Another summary part of the same item: the previous one ends here, the item goes on.
          if (typeof d.item_id === "string" && reasoningParts.has(d.item_id)) out.push(...start(), chatChunk(base, { reasoning_end: { more: true } }));
          if (typeof d.item_id === "string") reasoningParts.add(d.item_id);
          return out;
        case "response.reasoning_summary_text.delta":
          if (typeof d.delta === "string" && d.delta) out.push(...start(), chatChunk(base, { reasoning_content: d.delta }));
          return out;
        case "response.output_item.added":
          if (d.item?.type === "function_call") {
            out.push(...start());
            const c = callFor(d.item, out);
            fullArguments(c, d.item.arguments, out);
          }
          return out;
        case "response.output_text.delta":
          out.push(...start());
          if (typeof d.delta === "string" && d.delta) out.push(chatChunk(base, { content: d.delta }));
          return out;
        case "response.refusal.delta":
          out.push(...start());
          if (typeof d.delta === "string" && d.delta) out.push(chatChunk(base, { refusal: d.delta }));
          return out;
        case "response.function_call_arguments.delta": {
          const c = calls.get(String(d.item_id));
          if (c && typeof d.delta === "string" && d.delta) {
            c.argsSent = true;
            out.push(chatChunk(base, { tool_calls: [{ index: c.toolIndex, function: { arguments: d.delta } }] }));
          }
          return out;
        }
        case "response.function_call_arguments.done": {
          const c = calls.get(String(d.item_id));
          if (c) fullArguments(c, d.arguments, out);
          return out;
        }
        case "response.output_item.done":
          if (d.item?.type === "reasoning") {
            out.push(...start(), chatChunk(base, { reasoning_end: typeof d.item.encrypted_content === "string" ? { encrypted_content: d.item.encrypted_content } : {} }));
          }
          if (d.item?.type === "function_call") {
            out.push(...start());
            fullArguments(callFor(d.item, out), d.item.arguments, out);
          }
          return out;
        case "response.completed":
        case "response.incomplete":
          return finish(d.response ?? {});
        case "response.failed": {
          const e = d.response?.error ?? {};
          throw new UpstreamStreamError(`The upstream response failed (${e.code ?? "error"}): ${vendorText(e.message)}`, responsesErrorRetryable(String(e.code ?? "")));
        }
        case "error":
          throw new UpstreamStreamError(`Upstream stream error (${d.code ?? d.error?.code ?? "error"}): ${vendorText(d.message ?? d.error?.message)}`, responsesErrorRetryable(String(d.code ?? d.error?.code ?? d.error?.type ?? "")));
        default:
          return []; // hosted tools, annotations: no chat equivalent
      }
    },
    end(): Json[] {
      if (!finished) throw new UpstreamStreamError("The Responses stream ended before response.completed.");
      return [];
    },
    usage: () => usage,
  };
}
