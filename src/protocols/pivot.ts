// Small helpers over the chat pivot shared by the translating codecs (anthropic, gemini,
// responses): building chat completions and chunks, reading message content, and refusing
// what a target protocol cannot express. Pure.
import { randomToken } from "../lib/crypto.ts";
import { badRequest, unsupportedFeature } from "../errors.ts";
import { UpstreamStreamError, type Json, type ReasoningBlock, type SseEvent, type Usage } from "./types.ts";

/** A content part of a chat message (text, image_url, input_audio, file…). */
export type ChatPart = Json & { type: string };

/** Message content as parts: a string becomes one text part, null/undefined none. */
export function partsOf(content: unknown, where: string): ChatPart[] {
  if (content === null || content === undefined) return [];
  if (typeof content === "string") return [{ type: "text", text: content }];
  if (Array.isArray(content)) {
    return content.map((p, i) => {
      if (typeof p === "string") return { type: "text", text: p };
      if (!p || typeof p !== "object" || typeof p.type !== "string") throw badRequest(`${where}[${i}] must be a content part object with a \`type\`.`);
      return p as ChatPart;
    });
  }
  throw badRequest(`${where} must be a string or an array of content parts.`);
}

/** The text of message content (text parts joined); non-text parts are the caller's concern. */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((p) => (typeof p === "string" ? p : p && typeof p.text === "string" ? p.text : "")).join("");
}

/** `data:<mime>;base64,<data>` → parts, or null when the URL is not a base64 data URL. */
export function parseDataUrl(url: string): { mediaType: string; data: string } | null {
  const m = /^data:([^;,]+)?((?:;[^;,]+)*?);base64,(.*)$/s.exec(url);
  if (!m) return null;
  return { mediaType: m[1] || "application/octet-stream", data: m[3]! };
}

/** Tool-call arguments (a JSON string in chat) → object; bad JSON is the client's 400. */
export function parseArguments(args: unknown, where: string): Json {
  if (args === undefined || args === null || args === "") return {};
  if (typeof args === "object" && !Array.isArray(args)) return args as Json;
  if (typeof args !== "string") throw badRequest(`${where} must be a JSON string.`);
  let v: unknown;
  try {
    v = JSON.parse(args);
  } catch {
    throw badRequest(`${where} is not valid JSON; send the tool call's arguments as a JSON object string.`);
  }
  if (!v || typeof v !== "object" || Array.isArray(v)) throw badRequest(`${where} must encode a JSON object.`);
  return v as Json;
}

/**
 * Refuses a request field the lane's protocol cannot express (400 unsupported_feature). The
 * relay treats it as that lane's failure and moves on; the client sees it only when no lane can
 * serve. `param` is the parameter named by a leading `backticked` name in `what`, when there is one.
 */
export function unsupported(protocolLabel: string, what: string, hint = "remove it or route the request to a lane that supports it"): never {
  const param = /^`([A-Za-z_][A-Za-z0-9_.\[\]]*)`/.exec(what)?.[1];
  throw unsupportedFeature(`${what} is not supported on ${protocolLabel} lanes; ${hint}.`, param);
}

/** True when a field is present with a value other than the listed no-op values. */
export function isSet(v: unknown, ...noop: unknown[]): boolean {
  if (v === undefined || v === null) return false;
  return !noop.includes(v);
}

export const newCallId = () => `call_${randomToken(24)}`;
export const newChatId = () => `chatcmpl-${randomToken(29)}`;

/** Usage → the chat `usage` object (prompt_tokens includes cached input, as in OpenAI's). */
export function chatUsage(u: Usage): Json {
  const out: Json = {
    prompt_tokens: u.prompt_tokens,
    completion_tokens: u.completion_tokens,
    total_tokens: u.prompt_tokens + u.completion_tokens,
    prompt_tokens_details: { cached_tokens: u.cached_tokens },
  };
  if (u.cache_write_tokens) out.prompt_tokens_details.cache_write_tokens = u.cache_write_tokens;
  if (u.cache_write_1h_tokens) out.prompt_tokens_details.cache_write_1h_tokens = u.cache_write_1h_tokens;
  if (u.reasoning_tokens !== undefined) out.completion_tokens_details = { reasoning_tokens: u.reasoning_tokens };
  if (u.cost !== undefined) out.cost = u.cost;
  return out;
}

/** Where an OpenAI-style usage object keeps its counts: chat says prompt/completion, Responses input/output; the details objects hold the same fields. */
export interface UsageFieldNames {
  input: string;
  output: string;
  inputDetails: string;
  outputDetails: string;
}

/** An OpenAI-style usage object → Usage (null when it carries neither count). */
export function usageFromFields(u: unknown, f: UsageFieldNames): Usage | null {
  if (!u || typeof u !== "object") return null;
  const x = u as Json;
  if (typeof x[f.input] !== "number" && typeof x[f.output] !== "number") return null;
  const out: Usage = {
    prompt_tokens: num(x[f.input]),
    completion_tokens: num(x[f.output]),
    cached_tokens: num(x[f.inputDetails]?.cached_tokens),
    cache_write_tokens: num(x[f.inputDetails]?.cache_write_tokens),
  };
  // The gateway's own detail for 1-hour cache writes (a lane that is another such gateway, a bridge).
  const h1 = num(x[f.inputDetails]?.cache_write_1h_tokens);
  if (h1) out.cache_write_1h_tokens = h1;
  if (typeof x[f.outputDetails]?.reasoning_tokens === "number") out.reasoning_tokens = x[f.outputDetails].reasoning_tokens;
  return out;
}

const CHAT_USAGE_FIELDS: UsageFieldNames = { input: "prompt_tokens", output: "completion_tokens", inputDetails: "prompt_tokens_details", outputDetails: "completion_tokens_details" };

/** Chat `usage` object → Usage (null when absent). */
export function usageFromChat(u: unknown): Usage | null {
  return usageFromFields(u, CHAT_USAGE_FIELDS);
}

export const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);

export interface ChunkBase {
  id: string;
  model: string;
  created: number;
}

/** One chat.completion.chunk with a single choice. */
export function chatChunk(base: ChunkBase, delta: Json, finishReason: string | null = null, index = 0): Json {
  return {
    id: base.id,
    object: "chat.completion.chunk",
    created: base.created,
    model: base.model,
    choices: [{ index, delta, logprobs: null, finish_reason: finishReason }],
  };
}

/** The role chunk that opens a single-choice stream, once: later calls give nothing (the decoders hold it back until content, so an early error can still fail over). */
export function roleChunkOnce(base: ChunkBase): () => Json[] {
  let started = false;
  return () => {
    if (started) return [];
    started = true;
    return [chatChunk(base, { role: "assistant", content: "" })];
  };
}

/** An upstream stream event's JSON body; an event that is not JSON breaks the stream. */
export function streamEventJson(ev: SseEvent, streamName: string): Json {
  try {
    return JSON.parse(ev.data);
  } catch {
    throw new UpstreamStreamError(`The ${streamName} stream sent an event that is not JSON.`);
  }
}

export interface AssistantTurn {
  content: string | null;
  toolCalls: { id: string; name: string; arguments: string }[];
  finishReason: string;
  refusal?: string | null;
}

/** A chat.completion from decoded choices. */
export function chatCompletion(base: ChunkBase, choices: AssistantTurn[], usage: Usage | null): Json {
  const c: Json = {
    id: base.id,
    object: "chat.completion",
    created: base.created,
    model: base.model,
    choices: choices.map((t, index) => {
      const message: Json = { role: "assistant", content: t.content, refusal: t.refusal ?? null };
      if (t.toolCalls.length) {
        message.tool_calls = t.toolCalls.map((tc) => ({ id: tc.id, type: "function", function: { name: tc.name, arguments: tc.arguments } }));
      }
      return { index, message, logprobs: null, finish_reason: t.finishReason };
    }),
  };
  if (usage) c.usage = chatUsage(usage);
  return c;
}

/**
 * Puts a decoded answer's reasoning on choice 0's message: `reasoning_content` (the text, as
 * DeepSeek-style chat APIs send it) and the whole blocks in `reasoning_blocks` (types.ts).
 */
export function withReasoning(completion: Json, blocks: ReasoningBlock[]): Json {
  const m = completion.choices?.[0]?.message;
  if (!m || blocks.length === 0) return completion;
  const text = blocks.map((b) => b.text).join("");
  if (text) m.reasoning_content = text;
  m.reasoning_blocks = blocks;
  return completion;
}

/** A message's reasoning as whole blocks: its `reasoning_blocks`, else its `reasoning_content` as one block. */
export function reasoningBlocksOf(message: Json): ReasoningBlock[] {
  if (Array.isArray(message.reasoning_blocks)) return message.reasoning_blocks;
  return typeof message.reasoning_content === "string" && message.reasoning_content ? [{ text: message.reasoning_content }] : [];
}

/** Function tools of a chat request, validated: `[{name, description?, parameters?, strict?}]`. */
export function functionTools(tools: unknown, protocolLabel: string): { name: string; description?: string; parameters?: Json; strict?: boolean }[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw badRequest("`tools` must be an array.");
  return tools.map((t, i) => {
    if (!t || typeof t !== "object") throw badRequest(`tools[${i}] must be an object.`);
    if (t.type !== "function") unsupported(protocolLabel, `A tool of type ${JSON.stringify(t.type)} (tools[${i}])`, "send function tools only");
    const f = t.function;
    if (!f || typeof f !== "object" || typeof f.name !== "string" || !f.name) throw badRequest(`tools[${i}].function.name is required.`);
    return { name: f.name, description: typeof f.description === "string" ? f.description : undefined, parameters: f.parameters ?? undefined, strict: f.strict ?? undefined };
  });
}

/** chat tool_choice → a neutral form. */
export type ToolChoice = { kind: "auto" } | { kind: "none" } | { kind: "required" } | { kind: "function"; name: string };

export function toolChoiceOf(tc: unknown): ToolChoice | null {
  if (tc === undefined || tc === null) return null;
  if (tc === "auto" || tc === "none" || tc === "required") return { kind: tc };
  if (typeof tc === "object" && (tc as Json).type === "function") {
    const name = (tc as Json).function?.name ?? (tc as Json).name;
    if (typeof name === "string" && name) return { kind: "function", name };
  }
  throw badRequest("`tool_choice` must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": …}}.");
}

/** `stop` as a list. */
export function stopList(stop: unknown): string[] {
  if (stop === undefined || stop === null) return [];
  if (typeof stop === "string") return [stop];
  if (Array.isArray(stop) && stop.every((s) => typeof s === "string")) return stop as string[];
  throw badRequest("`stop` must be a string or an array of strings.");
}

/** max_completion_tokens, else max_tokens, else null. */
export function maxTokensOf(req: Json): number | null {
  const v = req.max_completion_tokens ?? req.max_tokens;
  if (v === undefined || v === null) return null;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw badRequest("`max_tokens` / `max_completion_tokens` must be a positive integer.");
  return v;
}

/** A vendor's error text without its closing period, so the relay can go on with its own sentence. */
export function vendorText(v: unknown, fallback = "no message"): string {
  return typeof v === "string" && v.trim() ? v.trim().replace(/\.+$/, "") : fallback;
}

/** Parses an upstream error body as JSON, or null. */
export function jsonOrNull(text: string): Json | null {
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" ? v : null;
  } catch {
    return null;
  }
}

/** Default routing meaning of an upstream HTTP status (CONTRACT §3): 408, 409, 429, 5xx and auth/permission failures move on; a 4xx about the request itself does not. */
export function retryableStatus(status: number): boolean {
  return status === 0 || status === 401 || status === 402 || status === 403 || status === 404 || status === 408 || status === 409 || status === 429 || status >= 500;
}
