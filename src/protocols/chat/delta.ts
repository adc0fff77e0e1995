// The one reading of a chat stream chunk that every translating stream encoder shares: choice 0
// (other choices are not expressible in the Responses or Anthropic event sequences) and its
// delta's text, refusal and tool-call parts, in that order.
import type { Json } from "../types.ts";

export interface DeltaWriter {
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
  if (typeof d.content === "string" && d.content) s += w.text(d.content);
  if (typeof d.refusal === "string" && d.refusal) s += w.refusal(d.refusal);
  if (Array.isArray(d.tool_calls)) for (const tc of d.tool_calls) s += w.toolCall(tc);
  return s;
}
