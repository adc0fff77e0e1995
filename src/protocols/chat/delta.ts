// The one reading of a chat stream chunk that every translating stream encoder shares: choice 0
// (other choices are not expressible in the Responses or Anthropic event sequences) and its
// delta's reasoning, text, refusal and tool-call parts, in that order.
import type { Json, ReasoningEnd } from "../types.ts";

export interface DeltaWriter {
  /** A piece of the model's reasoning (pivot `reasoning_content`); before the answer's text. */
  reasoning?(s: string): string;
  /** The end of one reasoning block (pivot `reasoning_end`, see pivot.ts ReasoningEnd). */
  reasoningEnd?(end: ReasoningEnd): string;
  text(s: string): string;
  refusal(s: string): string;
  toolCall(tc: Json): string;
}

/** Choice 0 of a chat chunk, or undefined for a usage-only chunk. */
export function firstChoice(chunk: Json): Json | undefined {
  return Array.isArray(chunk.choices) ? chunk.choices.find((c: Json) => (c?.index ?? 0) === 0) : undefined;
}

/** The encoder's output for one choice's delta. */
export function writeDelta(choice: Json, w: DeltaWriter): string {
  const d = choice.delta ?? {};
  let s = "";
  if (w.reasoning && typeof d.reasoning_content === "string" && d.reasoning_content) s += w.reasoning(d.reasoning_content);
  if (w.reasoningEnd && d.reasoning_end && typeof d.reasoning_end === "object") s += w.reasoningEnd(d.reasoning_end);
  if (typeof d.content === "string" && d.content) s += w.text(d.content);
  if (typeof d.refusal === "string" && d.refusal) s += w.refusal(d.refusal);
  if (Array.isArray(d.tool_calls)) for (const tc of d.tool_calls) s += w.toolCall(tc);
  return s;
}
