// Validated reads of a chat request that every encoder to another protocol (anthropic, gemini,
// responses) makes the same way: the message loop, the roles no protocol takes, assistant tool
// calls, tool-result ids, system text, image URLs, inline files, and the chat-only fields no
// target can express. One wording of each 400 whatever lane the request goes to. Pure.
import { badRequest } from "../errors.ts";
import type { AdaptLog } from "./adapt.ts";
import { isSet, parseDataUrl, partsOf, unsupported, type ChatPart } from "./pivot.ts";
import type { ChatRequest, Json } from "./types.ts";

/** Chat fields none of the translated protocols can express, whose loss would change the answer: 400 unsupported_feature. */
export function rejectChatOnlyFields(req: ChatRequest, label: string): void {
  if (isSet(req.logprobs, false)) unsupported(label, "`logprobs`");
  if (isSet(req.top_logprobs, 0)) unsupported(label, "`top_logprobs`");
  if (req.logit_bias && Object.keys(req.logit_bias).length) unsupported(label, "`logit_bias`");
  if (isSet(req.audio) || (Array.isArray(req.modalities) && req.modalities.some((m: unknown) => m !== "text"))) unsupported(label, "Audio output (`modalities` / `audio`)");
  if (isSet(req.prediction)) unsupported(label, "`prediction`");
  if (isSet(req.web_search_options)) unsupported(label, "`web_search_options`");
  if (isSet(req.functions) || isSet(req.function_call)) unsupported(label, "The legacy `functions` / `function_call` fields", "send `tools` / `tool_choice`");
}

/** Calls `each` for every message, in order, after checking `messages` is an array of objects. */
export function forEachMessage(messages: unknown, each: (m: Json, where: string) => void): void {
  if (!Array.isArray(messages)) throw badRequest("`messages` must be an array.");
  messages.forEach((m, i) => {
    const where = `messages[${i}]`;
    if (!m || typeof m !== "object") throw badRequest(`${where} must be an object.`);
    each(m as Json, where);
  });
}

/** The `default:` of an encoder's role switch: the legacy function role is unsupported, anything else a 400. */
export function unknownRole(m: Json, where: string, label: string): never {
  if (m.role === "function") unsupported(label, `The legacy "function" role (${where})`, "send tool messages with tool_call_id");
  throw badRequest(`${where}.role must be system, developer, user, assistant or tool.`);
}

export interface ToolCall {
  id: string;
  name: string;
  /** As the client sent it: normally a JSON string. */
  arguments: unknown;
  /** `messages[i].tool_calls[j]`, for error messages. */
  where: string;
}

/** An assistant message's tool calls, each checked to be {id, type: "function", function: {name, arguments}}. */
export function toolCallsOf(m: Json, where: string): ToolCall[] {
  if (!Array.isArray(m.tool_calls)) return [];
  return m.tool_calls.map((tc: Json, j: number) => {
    const w = `${where}.tool_calls[${j}]`;
    if (!tc || tc.type !== "function" || !tc.function?.name || !tc.id) throw badRequest(`${w} must be {id, type: "function", function: {name, arguments}}.`);
    return { id: tc.id, name: tc.function.name, arguments: tc.function.arguments, where: w };
  });
}

/** The tool call a tool message answers. */
export function toolCallIdOf(m: Json, where: string): string {
  if (typeof m.tool_call_id !== "string" || !m.tool_call_id) throw badRequest(`${where}.tool_call_id is required on tool messages.`);
  return m.tool_call_id;
}

/** The non-empty text parts of a system/developer message; any other part is unsupported. */
export function systemTextParts(content: unknown, where: string, label: string): ChatPart[] {
  return partsOf(content, `${where}.content`).filter((p) => {
    if (p.type !== "text") unsupported(label, `A ${p.type} part in a system message (${where})`, "send text only in system messages");
    return !!p.text;
  });
}

/** The URL of an image_url part (a string or {url}). */
export function imageUrlOf(p: ChatPart, where: string): string {
  const url = typeof p.image_url === "string" ? p.image_url : p.image_url?.url;
  if (typeof url !== "string" || !url) throw badRequest(`${where}.image_url.url is required.`);
  return url;
}

/** The inline data of a file part, for protocols that take files inline only (no file_id). */
export function inlineFileOf(p: ChatPart, where: string, label: string): { mediaType: string; data: string } {
  const f = p.file ?? {};
  if (f.file_id) unsupported(label, `A file referenced by file_id (${where})`, "send the file inline as file_data");
  const data = typeof f.file_data === "string" ? parseDataUrl(f.file_data) : null;
  if (!data) throw badRequest(`${where}.file.file_data must be a base64 data URL.`);
  return data;
}

/** `response_format` → json_object / json_schema (schema checked to be an object), or null for text or none. */
export function structuredFormatOf(rf: unknown): { type: "json_object" } | { type: "json_schema"; spec: Json } | null {
  if (rf === undefined || rf === null) return null;
  if (typeof rf !== "object") throw badRequest("`response_format` must be an object.");
  const f = rf as Json;
  if (f.type === "text") return null;
  if (f.type === "json_object") return { type: "json_object" };
  if (f.type === "json_schema") {
    const js = f.json_schema;
    if (!js || typeof js !== "object" || !js.schema || typeof js.schema !== "object") throw badRequest("`response_format.json_schema.schema` is required.");
    return { type: "json_schema", spec: js };
  }
  throw badRequest("`response_format.type` must be \"text\", \"json_object\" or \"json_schema\".");
}

/**
 * Notes the fields of `req` a lane's encoder leaves out because they only tune the vendor's own
 * behaviour (prompt caching, storage, metadata, safety ids…): dropped under either policy, as
 * before, and now named. Only fields the client set (not null, not false) are named.
 */
export function noteDropped(req: ChatRequest, log: AdaptLog | undefined, fields: readonly string[]): void {
  if (!log) return;
  for (const f of fields) if (isSet(req[f], false)) log.note(f, "dropped");
}
