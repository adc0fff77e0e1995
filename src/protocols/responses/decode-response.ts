// A Response object (from a Responses-only lane) → chat completion.
import { chatCompletion, withReasoning, type AssistantTurn } from "../pivot.ts";
import { GatewayError } from "../../errors.ts";
import type { Json, ReasoningBlock, Usage } from "../types.ts";
import { usageFromResponses } from "./usage.ts";

/** Response status (+ incomplete reason, + whether it called functions) → chat finish_reason. */
export function finishReasonOf(status: unknown, incompleteReason: unknown, hadToolCalls: boolean): string {
  if (status === "incomplete") return incompleteReason === "content_filter" ? "content_filter" : "length";
  return hadToolCalls ? "tool_calls" : "stop";
}

/** Reasoning items → reasoning blocks: one per summary part (`more` joins the parts of one item), the item's encrypted content on its last. */
export function reasoningOfOutput(output: unknown): ReasoningBlock[] {
  const out: ReasoningBlock[] = [];
  for (const item of Array.isArray(output) ? output : []) {
    if (item?.type !== "reasoning") continue;
    const parts: string[] = (Array.isArray(item.summary) ? item.summary : []).map((p: Json) => (typeof p?.text === "string" ? p.text : ""));
    const blocks: ReasoningBlock[] = (parts.length ? parts : [""]).map((text) => ({ text, more: true }));
    const last = blocks[blocks.length - 1]!;
    delete last.more;
    if (typeof item.encrypted_content === "string") last.encrypted_content = item.encrypted_content;
    out.push(...blocks);
  }
  return out;
}

export function outputToTurn(output: unknown): { text: string; refusal: string; calls: AssistantTurn["toolCalls"] } {
  let text = "";
  let refusal = "";
  const calls: AssistantTurn["toolCalls"] = [];
  for (const item of Array.isArray(output) ? output : []) {
    if (item?.type === "message") {
      for (const p of Array.isArray(item.content) ? item.content : []) {
        if (p?.type === "output_text" && typeof p.text === "string") text += p.text;
        else if (p?.type === "refusal" && typeof p.refusal === "string") refusal += p.refusal;
      }
    } else if (item?.type === "function_call") {
      calls.push({ id: String(item.call_id ?? item.id), name: String(item.name), arguments: typeof item.arguments === "string" ? item.arguments : JSON.stringify(item.arguments ?? {}) });
    }
    // reasoning: reasoningOfOutput; hosted-tool items have no chat equivalent.
  }
  return { text, refusal, calls };
}

export function decodeResponsesResponse(body: Json, opts: { model: string; id?: string; created?: number }): { completion: Json; usage: Usage | null } {
  if (body.status === "failed") {
    throw new GatewayError(502, `The upstream answered with a failed response: ${body.error?.message ?? "no message"}. Retry the request.`, { code: "upstream_error" });
  }
  const { text, refusal, calls } = outputToTurn(body.output);
  const usage = usageFromResponses(body.usage);
  const completion = chatCompletion(
    {
      id: opts.id ?? (typeof body.id === "string" ? `chatcmpl-${body.id.replace(/^resp_/, "")}` : "chatcmpl-responses"),
      model: typeof body.model === "string" ? body.model : opts.model,
      created: opts.created ?? (typeof body.created_at === "number" ? body.created_at : Math.floor(Date.now() / 1000)),
    },
    [{ content: text || null, refusal: refusal || null, toolCalls: calls, finishReason: finishReasonOf(body.status, body.incomplete_details?.reason, calls.length > 0) }],
    usage,
  );
  withReasoning(completion, reasoningOfOutput(body.output));
  return { completion, usage };
}
