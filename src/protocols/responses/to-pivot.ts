// A Responses request (POST /v1/responses) → the chat pivot, for lanes that do not speak
// Responses natively. What needs server-side state (previous_response_id, conversation,
// item_reference, background) or a hosted tool cannot be translated and is refused. Under the
// `adapt` policy (adapt.ts) Codex's tool dialect is carried too (tool-map.ts): `additional_tools`
// input items, `namespace` tools, freeform `custom` tools and their calls in the history.
import { badRequest, GatewayError } from "../../errors.ts";
import type { AdaptLog } from "../adapt.ts";
import { isSet, unsupported } from "../pivot.ts";
import type { ChatRequest, Json } from "../types.ts";
import { collectTools, type ToolMap } from "./tool-map.ts";

const LABEL = "non-Responses";

export function responsesToPivot(body: Json, adapt?: AdaptLog): ChatRequest {
  if (typeof body.model !== "string" || !body.model) throw new GatewayError(400, "The request needs a `model` string.");
  if (body.input === undefined || body.input === null) throw new GatewayError(400, "The request needs `input`: a string or an array of input items.");
  rejectStateful(body);
  const { tools, map } = collectTools(body, adapt);

  const messages: Json[] = [];
  if (isSet(body.instructions, "")) {
    if (typeof body.instructions !== "string") throw badRequest("`instructions` must be a string.");
    messages.push({ role: "system", content: body.instructions });
  }
  if (typeof body.input === "string") messages.push({ role: "user", content: body.input });
  else if (Array.isArray(body.input)) convertItems(body.input, messages, map, adapt?.adapting === true);
  else throw badRequest("`input` must be a string or an array of input items.");

  const req: ChatRequest = { model: body.model, messages };
  if (body.stream === true) {
    req.stream = true;
    req.stream_options = { include_usage: true };
  }
  if (isSet(body.max_output_tokens)) req.max_tokens = body.max_output_tokens;
  for (const k of ["temperature", "top_p", "parallel_tool_calls", "user", "safety_identifier", "prompt_cache_key", "service_tier"] as const) {
    if (isSet(body[k])) req[k] = body[k];
  }
  if (isSet(body.reasoning?.effort)) req.reasoning_effort = body.reasoning.effort;
  if (isSet(body.text?.verbosity)) req.verbosity = body.text.verbosity;
  const rf = responseFormatOf(body.text?.format);
  if (rf) req.response_format = rf;
  if (tools.length) req.tools = tools;
  if (isSet(body.tool_choice)) req.tool_choice = toolChoiceOf(body.tool_choice, map, adapt?.adapting === true);
  noteDropped(body, adapt);
  return req;
}

/** What a chat lane has no place for and that only OpenAI's own state or tuning reads: dropped, as before, and named. */
function noteDropped(body: Json, log: AdaptLog | undefined): void {
  if (!log) return;
  if (Array.isArray(body.include) && body.include.length) log.note("include", "dropped");
  if (body.store === true) log.note("store", "dropped");
  if (isSet(body.truncation, "disabled")) log.note("truncation", "dropped");
  if (body.metadata && typeof body.metadata === "object" && Object.keys(body.metadata).length) log.note("metadata", "dropped");
  if (isSet(body.prompt_cache_retention)) log.note("prompt_cache_retention", "dropped");
  if (isSet(body.client_metadata)) log.note("client_metadata", "dropped");
}

function rejectStateful(body: Json): void {
  if (isSet(body.previous_response_id)) unsupported(LABEL, "`previous_response_id` (stored conversation state)", "send the whole conversation in `input`");
  if (isSet(body.conversation)) unsupported(LABEL, "`conversation` (stored conversation state)", "send the whole conversation in `input`");
  if (body.background === true) unsupported(LABEL, "`background` mode");
  if (isSet(body.prompt)) unsupported(LABEL, "Stored prompt templates (`prompt`)");
  if (isSet(body.top_logprobs, 0)) unsupported(LABEL, "`top_logprobs`");
  if (isSet(body.max_tool_calls)) unsupported(LABEL, "`max_tool_calls`");
  if (Array.isArray(body.include) && body.include.includes("message.output_text.logprobs")) unsupported(LABEL, "`include: message.output_text.logprobs`");
}

function responseFormatOf(f: unknown): Json | null {
  if (f === undefined || f === null) return null;
  if (typeof f !== "object") throw badRequest("`text.format` must be an object.");
  const x = f as Json;
  if (x.type === "text") return null;
  if (x.type === "json_object") return { type: "json_object" };
  if (x.type === "json_schema") {
    if (typeof x.name !== "string" || !x.schema) throw badRequest("`text.format` of type json_schema needs `name` and `schema`.");
    const js: Json = { name: x.name, schema: x.schema };
    if (x.strict !== undefined) js.strict = x.strict;
    if (x.description !== undefined) js.description = x.description;
    return { type: "json_schema", json_schema: js };
  }
  throw badRequest("`text.format.type` must be text, json_object or json_schema.");
}

function toolChoiceOf(tc: unknown, map: ToolMap, adapting: boolean): unknown {
  if (tc === "auto" || tc === "none" || tc === "required") return tc;
  const t = tc as Json;
  if (t && typeof t === "object" && (t.type === "function" || (adapting && t.type === "custom")) && typeof t.name === "string") {
    const ns = adapting && typeof t.namespace === "string" ? t.namespace : undefined;
    return { type: "function", function: { name: t.type === "custom" || ns ? map.laneName(t.name, ns) : t.name } };
  }
  return unsupported(LABEL, `\`tool_choice\` ${JSON.stringify(tc)}`, "send auto, none, required or {type: \"function\", name}");
}

/**
 * Input items → chat messages; consecutive function calls join the assistant message before them.
 * `adapting`: Codex's items are carried too (custom tool calls and their outputs, namespaced
 * calls under their lane names; the additional_tools item's tools are already the request's).
 */
function convertItems(items: unknown[], messages: Json[], map: ToolMap, adapting: boolean): void {
  // The assistant message that function_call items may still join (until anything else comes).
  let openAssistant: Json | null = null;
  items.forEach((raw, i) => {
    const where = `input[${i}]`;
    if (!raw || typeof raw !== "object") throw badRequest(`${where} must be an object.`);
    const item = raw as Json;
    const type = item.type ?? (item.role ? "message" : undefined);
    switch (type) {
      case "message": {
        const role = item.role;
        if (role === "assistant") {
          openAssistant = { role: "assistant", content: assistantText(item.content, where) };
          messages.push(openAssistant);
          return;
        }
        if (role !== "user" && role !== "system" && role !== "developer") throw badRequest(`${where}.role must be user, assistant, system or developer.`);
        messages.push({ role: role === "user" ? "user" : "system", content: userContent(item.content, where, role !== "user") });
        openAssistant = null;
        return;
      }
      case "function_call":
      case "custom_tool_call": {
        const custom = type === "custom_tool_call";
        if (custom && !adapting) return unsupported(LABEL, `An input item of type "custom_tool_call" (${where})`, "send messages, function calls and function call outputs");
        if (typeof item.call_id !== "string" || typeof item.name !== "string") throw badRequest(`${where} (${type}) needs call_id and name.`);
        if (!openAssistant) {
          openAssistant = { role: "assistant", content: null };
          messages.push(openAssistant);
        }
        const a: Json = openAssistant;
        const ns = adapting && typeof item.namespace === "string" && item.namespace ? item.namespace : undefined;
        const name = custom || ns ? map.laneName(item.name, ns) : item.name;
        const args = custom
          ? JSON.stringify({ input: typeof item.input === "string" ? item.input : "" })
          : typeof item.arguments === "string" ? item.arguments : JSON.stringify(item.arguments ?? {});
        (a.tool_calls ??= []).push({ id: item.call_id, type: "function", function: { name, arguments: args } });
        return;
      }
      case "additional_tools":
        return; // its tools are the request's (collectTools), which refused it under strict
      case "custom_tool_call_output":
        if (!adapting) return unsupported(LABEL, `An input item of type "custom_tool_call_output" (${where})`, "send messages, function calls and function call outputs");
      // falls through: the same shape as a function call's output
      case "function_call_output": {
        if (typeof item.call_id !== "string") throw badRequest(`${where} (${type}) needs call_id.`);
        const out = item.output;
        const content = typeof out === "string" ? out : Array.isArray(out) ? userContent(out, `${where}.output`, false) : JSON.stringify(out ?? "");
        messages.push({ role: "tool", tool_call_id: item.call_id, content });
        openAssistant = null;
        return;
      }
      case "reasoning":
        // Encrypted or summarised reasoning of an earlier turn: only its own model can use it.
        return;
      case "item_reference":
        return unsupported(LABEL, `An item_reference (${where}) to stored state`, "send the item itself");
      default:
        return unsupported(LABEL, `An input item of type ${JSON.stringify(type)} (${where})`, "send messages, function calls and function call outputs");
    }
  });
}

function assistantText(content: unknown, where: string): string | null {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw badRequest(`${where}.content must be a string or an array.`);
  let text = "";
  for (const p of content) {
    if (p?.type === "output_text" || p?.type === "input_text") text += p.text ?? "";
    else if (p?.type === "refusal") text += p.refusal ?? "";
    else unsupported(LABEL, `A ${JSON.stringify(p?.type)} part in an assistant message (${where})`);
  }
  return text;
}

function userContent(content: unknown, where: string, textOnly: boolean): string | Json[] {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw badRequest(`${where}.content must be a string or an array of content parts.`);
  const parts = content.map((p: Json, j: number) => {
    const w = `${where}.content[${j}]`;
    switch (p?.type) {
      case "input_text":
      case "output_text":
        return { type: "text", text: p.text ?? "" };
      case "input_image": {
        if (p.file_id || !p.image_url) unsupported(LABEL, `An image referenced by file_id (${w})`, "send image_url (an http(s) or data URL)");
        const image: Json = { url: p.image_url };
        if (p.detail) image.detail = p.detail;
        return { type: "image_url", image_url: image };
      }
      case "input_file": {
        if (p.file_url) unsupported(LABEL, `A file referenced by file_url (${w})`, "send file_data");
        const file: Json = {};
        if (p.file_id) file.file_id = p.file_id;
        if (p.file_data) file.file_data = p.file_data;
        if (p.filename) file.filename = p.filename;
        return { type: "file", file };
      }
      case "input_audio":
        return { type: "input_audio", input_audio: p.input_audio ?? { data: p.data, format: p.format } };
      default:
        return unsupported(LABEL, `A content part of type ${JSON.stringify(p?.type)} (${w})`);
    }
  });
  if (textOnly && parts.some((p) => p.type !== "text")) unsupported(LABEL, `A non-text part in a system or developer message (${where})`);
  return parts;
}
