// A chat completion → a Response object (the answer of POST /v1/responses).
import { randomToken } from "../../lib/crypto.ts";
import { reasoningBlocksOf, usageFromChat } from "../pivot.ts";
import type { Json, ReasoningBlock, Usage } from "../types.ts";
import { clientCallItem, toolMapOf, type ToolMap } from "./tool-map.ts";
import { responsesUsage } from "./usage.ts";

export const newResponseId = () => `resp_${randomToken(32)}`;
export const newMessageItemId = () => `msg_${randomToken(32)}`;
export const newFunctionItemId = () => `fc_${randomToken(32)}`;
export const newCustomCallItemId = () => `ctc_${randomToken(32)}`;

/** A chat tool call as the client's output item: a function_call, or what tool-map.ts maps it back to. */
export function callItem(map: ToolMap | null, id: string | null, status: string, callId: string, laneName: string, args: string): Json {
  const item = clientCallItem(map, callId, laneName, args);
  return { id: id ?? (item.type === "custom_tool_call" ? newCustomCallItemId() : newFunctionItemId()), status, ...item };
}
export const newReasoningItemId = () => `rs_${randomToken(32)}`;

/** A reasoning output item: its summary parts and, when its vendor sent it, its encrypted content. */
export function reasoningItem(id: string, parts: string[], encrypted: string | undefined): Json {
  return { id, type: "reasoning", summary: parts.map((text) => ({ type: "summary_text", text })), ...(encrypted !== undefined ? { encrypted_content: encrypted } : {}) };
}

/** Reasoning blocks → reasoning items (consecutive blocks marked `more` share one item). */
export function reasoningItems(blocks: ReasoningBlock[]): Json[] {
  const out: Json[] = [];
  let parts: string[] = [];
  for (const b of blocks) {
    if (b.redacted !== undefined) continue; // Anthropic's redacted reasoning has no Responses form
    parts.push(b.text);
    if (b.more) continue;
    // An item without a summary (only encrypted content) is one block with no text.
    out.push(reasoningItem(newReasoningItemId(), parts.length === 1 && parts[0] === "" ? [] : parts, b.encrypted_content));
    parts = [];
  }
  if (parts.length) out.push(reasoningItem(newReasoningItemId(), parts, undefined));
  return out;
}

/** chat finish_reason → Response status and incomplete_details. */
export function statusOf(finishReason: string | null | undefined): { status: "completed" | "incomplete"; incomplete_details: Json | null } {
  if (finishReason === "length") return { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } };
  if (finishReason === "content_filter") return { status: "incomplete", incomplete_details: { reason: "content_filter" } };
  return { status: "completed", incomplete_details: null };
}

/** The request-echo fields every Response object carries. */
export function responseSkeleton(request: Json, id: string, model: string, createdAt: number): Json {
  return {
    id,
    object: "response",
    created_at: createdAt,
    status: "in_progress",
    background: false,
    error: null,
    incomplete_details: null,
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    max_tool_calls: null,
    model,
    output: [],
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: request.reasoning?.effort ?? null, summary: null },
    service_tier: request.service_tier ?? "default",
    store: false,
    temperature: request.temperature ?? 1,
    text: { format: request.text?.format ?? { type: "text" }, ...(request.text?.verbosity ? { verbosity: request.text.verbosity } : {}) },
    tool_choice: request.tool_choice ?? "auto",
    tools: Array.isArray(request.tools) ? request.tools : [],
    top_p: request.top_p ?? 1,
    truncation: request.truncation ?? "disabled",
    // No `usage` until it is known: OpenAI's schema types it as an object, never null.
    // OpenAI's schema types `user` as a string: leave it out rather than send null.
    ...(typeof request.user === "string" ? { user: request.user } : {}),
    metadata: request.metadata ?? {},
  };
}

export const outputTextPart = (text: string): Json => ({ type: "output_text", text, annotations: [], logprobs: [] });

export function responsesFromPivot(completion: Json, usage: Usage | null, request: Json): Json {
  const choice = Array.isArray(completion.choices) ? completion.choices[0] : undefined;
  const message = choice?.message ?? {};
  const created = typeof completion.created === "number" ? completion.created : Math.floor(Date.now() / 1000);
  const r = responseSkeleton(request, newResponseId(), typeof completion.model === "string" ? completion.model : request.model, created);
  const output: Json[] = reasoningItems(reasoningBlocksOf(message));
  const content: Json[] = [];
  if (typeof message.content === "string" && message.content) content.push(outputTextPart(message.content));
  if (typeof message.refusal === "string" && message.refusal) content.push({ type: "refusal", refusal: message.refusal });
  if (content.length) output.push({ id: newMessageItemId(), type: "message", status: "completed", role: "assistant", content });
  const calls: Json[] = Array.isArray(message.tool_calls) ? message.tool_calls : [];
  const map = calls.length ? toolMapOf(request) : null;
  for (const tc of calls) output.push(callItem(map, null, "completed", tc.id, tc.function?.name, tc.function?.arguments ?? ""));
  Object.assign(r, statusOf(choice?.finish_reason));
  r.output = output;
  const u = usage ?? usageFromChat(completion.usage);
  if (u) r.usage = responsesUsage(u);
  return r;
}
