// Gemini streamGenerateContent (alt=sse) → chat.completion.chunk objects.
//
// Every event is a whole GenerateContentResponse holding the next parts of each candidate:
// text parts become content deltas, a functionCall part (sent whole, never split) becomes one
// tool_calls entry with its full arguments, finishReason closes that candidate's choice, and
// usageMetadata (cumulative) is kept from the latest event. There is no terminal event: a
// stream that ends with no finishReason was cut off. An `{"error": …}` event throws.
import { chatChunk, newCallId, num, streamEventJson, vendorText, type ChunkBase } from "../pivot.ts";
import { UpstreamStreamError, type ChunkDecoder, type Json, type SseEvent, type Usage } from "../types.ts";
import { finishReasonOf, usageFromGemini } from "./decode-response.ts";
import { geminiErrorRetryable } from "./errors.ts";

interface CandidateState {
  started: boolean;
  tools: number;
  finished: boolean;
}

export function geminiStreamDecoder(opts: { model: string; id: string; created: number }): ChunkDecoder {
  const base: ChunkBase = { id: opts.id, model: opts.model, created: opts.created };
  const candidates = new Map<number, CandidateState>();
  let usage: Usage | null = null;

  const stateOf = (i: number) => {
    let s = candidates.get(i);
    if (!s) candidates.set(i, (s = { started: false, tools: 0, finished: false }));
    return s;
  };

  return {
    push(ev: SseEvent): Json[] {
      const d = streamEventJson(ev, "Gemini");
      if (d.error) {
        const e = d.error;
        throw new UpstreamStreamError(`Gemini stream error (${e.status ?? e.code ?? "error"}): ${vendorText(e.message)}`, geminiErrorRetryable(num(e.code), String(e.status ?? "")));
      }
      if (typeof d.modelVersion === "string" && d.modelVersion) base.model = d.modelVersion;
      const u = usageFromGemini(d.usageMetadata);
      if (u) usage = u;
      const out: Json[] = [];
      const list: Json[] = Array.isArray(d.candidates) ? d.candidates : [];
      if (!list.length && d.promptFeedback?.blockReason) {
        const s = stateOf(0);
        if (!s.finished) {
          s.finished = true;
          if (!s.started) out.push(chatChunk(base, { role: "assistant", content: "" }));
          s.started = true;
          out.push(chatChunk(base, {}, "content_filter"));
        }
        return out;
      }
      for (const c of list) {
        const index = num(c.index);
        const s = stateOf(index);
        if (s.finished) continue;
        if (!s.started) {
          s.started = true;
          out.push(chatChunk(base, { role: "assistant", content: "" }, null, index));
        }
        for (const p of Array.isArray(c.content?.parts) ? c.content.parts : []) {
          if (!p || typeof p !== "object") continue;
          // A thought summary is the model's reasoning; choice 0's is what the pivot carries.
          if (p.thought === true) {
            if (index === 0 && typeof p.text === "string" && p.text) out.push(chatChunk(base, { reasoning_content: p.text }, null, index));
            continue;
          }
          if (typeof p.text === "string" && p.text) out.push(chatChunk(base, { content: p.text }, null, index));
          else if (p.functionCall && typeof p.functionCall.name === "string") {
            const fc = p.functionCall;
            out.push(chatChunk(base, {
              tool_calls: [{ index: s.tools++, id: typeof fc.id === "string" && fc.id ? fc.id : newCallId(), type: "function", function: { name: fc.name, arguments: JSON.stringify(fc.args ?? {}) } }],
            }, null, index));
          }
        }
        if (typeof c.finishReason === "string" && c.finishReason !== "FINISH_REASON_UNSPECIFIED") {
          s.finished = true;
          out.push(chatChunk(base, {}, finishReasonOf(c.finishReason, s.tools > 0), index));
        }
      }
      return out;
    },
    end(): Json[] {
      const all = [...candidates.values()];
      if (!all.some((s) => s.finished)) throw new UpstreamStreamError("The Gemini stream ended before any candidate finished.");
      // A candidate that never sent finishReason while another did: close it as stopped.
      const out: Json[] = [];
      for (const [index, s] of candidates) if (!s.finished) { s.finished = true; out.push(chatChunk(base, {}, finishReasonOf("STOP", s.tools > 0), index)); }
      return out;
    },
    usage: () => usage,
  };
}
