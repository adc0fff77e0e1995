// Chat pivot → Anthropic Messages request body.
//
// Decisions (documented in docs/protocol-translation.md):
// - system/developer messages, wherever they sit, become the top-level `system` blocks in order.
// - turns alternate: consecutive same-role turns merge; tool results become `tool_result` blocks
//   in the following user turn (before any user text, as Anthropic requires).
// - `max_tokens` is always sent: max_completion_tokens, else max_tokens, else 4096.
// - `response_format` json_schema / json_object become one forced tool (JSON_TOOL_NAME) whose
//   input is the JSON answer; the decoders turn that tool's input back into message text.
// - what Messages cannot express is a 400 unsupported_feature naming it, never clamped.
import { badRequest } from "../../errors.ts";
import {
  functionTools, isSet, maxTokensOf, parseArguments, parseDataUrl, partsOf, stopList, toolChoiceOf, unsupported, type ChatPart,
} from "../pivot.ts";
import type { ChatRequest, Json } from "../types.ts";

export const DEFAULT_MAX_TOKENS = 4096;
/** The forced tool that carries a `response_format` answer; a client tool may not use this name. */
export const JSON_TOOL_NAME = "json_response";
const LABEL = "anthropic";

type Block = Json & { type: string };
interface Turn {
  role: "user" | "assistant";
  content: Block[];
}

export function encodeAnthropicRequest(req: ChatRequest, opts: { model: string; stream: boolean }): Json {
  rejectInexpressible(req);
  const { system, messages } = convertMessages(req.messages);
  const body: Json = { model: opts.model, max_tokens: maxTokensOf(req) ?? DEFAULT_MAX_TOKENS, messages };
  if (system.length) body.system = system;
  if (opts.stream) body.stream = true;

  if (isSet(req.temperature)) {
    const t = req.temperature;
    if (typeof t !== "number" || t < 0) throw badRequest("`temperature` must be a number ≥ 0.");
    if (t > 1) unsupported(LABEL, `\`temperature\` ${t} (Anthropic accepts 0 to 1)`, "send a temperature between 0 and 1");
    body.temperature = t;
  }
  if (isSet(req.top_p)) body.top_p = req.top_p;
  if (isSet(req.top_k)) body.top_k = req.top_k;
  const stops = stopList(req.stop);
  if (stops.length) body.stop_sequences = stops;
  if (typeof req.user === "string" && req.user) body.metadata = { user_id: req.user };
  if (req.service_tier === "auto") body.service_tier = "auto";
  else if (req.service_tier === "default") body.service_tier = "standard_only";

  const tools = functionTools(req.tools, LABEL).map((t) => {
    if (t.name === JSON_TOOL_NAME) unsupported(LABEL, `A tool named "${JSON_TOOL_NAME}"`, "that name is reserved for response_format; rename the tool");
    const tool: Json = { name: t.name, input_schema: t.parameters ?? { type: "object", properties: {} } };
    if (t.description) tool.description = t.description;
    return tool;
  });
  const choice = toolChoiceOf(req.tool_choice);
  const format = responseFormatTool(req.response_format);
  if (format) {
    if (tools.length) unsupported(LABEL, "`response_format` together with `tools`", "Anthropic answers structured output through a forced tool, which excludes other tools; send one or the other");
    body.tools = [format];
    body.tool_choice = { type: "tool", name: JSON_TOOL_NAME };
  } else if (tools.length) {
    body.tools = tools;
    let tc: Json | undefined;
    if (choice?.kind === "auto") tc = { type: "auto" };
    else if (choice?.kind === "none") tc = { type: "none" };
    else if (choice?.kind === "required") tc = { type: "any" };
    else if (choice?.kind === "function") {
      if (!tools.some((t) => t.name === choice.name)) throw badRequest(`\`tool_choice\` names "${choice.name}", which is not in \`tools\`.`);
      tc = { type: "tool", name: choice.name };
    }
    if (req.parallel_tool_calls === false && choice?.kind !== "none") (tc ??= { type: "auto" }).disable_parallel_tool_use = true;
    if (tc) body.tool_choice = tc;
  } else if (choice && choice.kind !== "none" && choice.kind !== "auto") {
    throw badRequest("`tool_choice` requires `tools`.");
  }
  return body;
}

/** Chat parameters with no Messages equivalent whose loss would change the answer: 400. */
function rejectInexpressible(req: ChatRequest): void {
  if (isSet(req.n, 1)) unsupported(LABEL, "`n` > 1 (several choices)", "send n = 1 and repeat the request");
  if (isSet(req.logprobs, false)) unsupported(LABEL, "`logprobs`");
  if (isSet(req.top_logprobs, 0)) unsupported(LABEL, "`top_logprobs`");
  if (req.logit_bias && Object.keys(req.logit_bias).length) unsupported(LABEL, "`logit_bias`");
  if (isSet(req.presence_penalty, 0)) unsupported(LABEL, "`presence_penalty`");
  if (isSet(req.frequency_penalty, 0)) unsupported(LABEL, "`frequency_penalty`");
  if (isSet(req.reasoning_effort)) unsupported(LABEL, "`reasoning_effort`", "Anthropic's extended thinking cannot be carried through chat tool-call history; remove it");
  if (isSet(req.verbosity, "medium")) unsupported(LABEL, "`verbosity`");
  if (isSet(req.audio) || (Array.isArray(req.modalities) && req.modalities.some((m: unknown) => m !== "text"))) unsupported(LABEL, "Audio output (`modalities` / `audio`)");
  if (isSet(req.prediction)) unsupported(LABEL, "`prediction`");
  if (isSet(req.web_search_options)) unsupported(LABEL, "`web_search_options`");
  if (isSet(req.service_tier, "auto", "default")) unsupported(LABEL, `\`service_tier\` "${req.service_tier}"`, "send \"auto\" or \"default\"");
  if (isSet(req.functions) || isSet(req.function_call)) unsupported(LABEL, "The legacy `functions` / `function_call` fields", "send `tools` / `tool_choice`");
}

function responseFormatTool(rf: unknown): Json | null {
  if (rf === undefined || rf === null) return null;
  if (typeof rf !== "object") throw badRequest("`response_format` must be an object.");
  const f = rf as Json;
  if (f.type === "text") return null;
  if (f.type === "json_object") {
    return { name: JSON_TOOL_NAME, description: "Respond with the final answer as a JSON object.", input_schema: { type: "object" } };
  }
  if (f.type === "json_schema") {
    const js = f.json_schema;
    if (!js || typeof js !== "object" || !js.schema || typeof js.schema !== "object") throw badRequest("`response_format.json_schema.schema` is required.");
    if (js.schema.type !== "object") unsupported(LABEL, "A `response_format` schema whose root is not an object", "wrap the answer in an object");
    const desc = [`Respond with the final answer${js.name ? ` (${js.name})` : ""} as JSON matching this schema.`, js.description].filter(Boolean).join(" ");
    return { name: JSON_TOOL_NAME, description: desc, input_schema: js.schema };
  }
  throw badRequest("`response_format.type` must be \"text\", \"json_object\" or \"json_schema\".");
}

function convertMessages(messages: Json[]): { system: Block[]; messages: Turn[] } {
  if (!Array.isArray(messages)) throw badRequest("`messages` must be an array.");
  const system: Block[] = [];
  const turns: Turn[] = [];
  const push = (role: Turn["role"], blocks: Block[]) => {
    if (!blocks.length) return;
    const prev = turns[turns.length - 1];
    if (prev && prev.role === role) {
      // Tool results lead a user turn: a tool message after user text goes before that text.
      if (role === "user" && blocks.every((b) => b.type === "tool_result")) {
        const firstOther = prev.content.findIndex((b) => b.type !== "tool_result");
        if (firstOther >= 0) {
          prev.content.splice(firstOther, 0, ...blocks);
          return;
        }
      }
      prev.content.push(...blocks);
    } else turns.push({ role, content: blocks });
  };

  messages.forEach((m, i) => {
    const where = `messages[${i}]`;
    if (!m || typeof m !== "object") throw badRequest(`${where} must be an object.`);
    switch (m.role) {
      case "system":
      case "developer":
        for (const p of partsOf(m.content, `${where}.content`)) {
          if (p.type !== "text") unsupported(LABEL, `A ${p.type} part in a system message (${where})`, "send text only in system messages");
          if (p.text) system.push(withCache({ type: "text", text: p.text }, p));
        }
        break;
      case "user":
        push("user", partsOf(m.content, `${where}.content`).map((p, j) => userBlock(p, `${where}.content[${j}]`)).filter(nonEmpty));
        break;
      case "assistant": {
        const blocks: Block[] = [];
        for (const p of partsOf(m.content, `${where}.content`)) {
          if (p.type === "text") blocks.push(withCache({ type: "text", text: p.text ?? "" }, p));
          else if (p.type === "refusal") blocks.push({ type: "text", text: p.refusal ?? "" });
          else unsupported(LABEL, `A ${p.type} part in an assistant message (${where})`);
        }
        if (Array.isArray(m.tool_calls)) {
          m.tool_calls.forEach((tc: Json, j: number) => {
            const w = `${where}.tool_calls[${j}]`;
            if (!tc || tc.type !== "function" || !tc.function?.name || !tc.id) throw badRequest(`${w} must be {id, type: "function", function: {name, arguments}}.`);
            blocks.push({ type: "tool_use", id: tc.id, name: tc.function.name, input: parseArguments(tc.function.arguments, `${w}.function.arguments`) });
          });
        }
        push("assistant", blocks.filter(nonEmpty));
        break;
      }
      case "tool": {
        if (typeof m.tool_call_id !== "string" || !m.tool_call_id) throw badRequest(`${where}.tool_call_id is required on tool messages.`);
        const parts = partsOf(m.content, `${where}.content`);
        const content = parts.every((p) => p.type === "text")
          ? parts.map((p) => p.text ?? "").join("")
          : parts.map((p, j) => userBlock(p, `${where}.content[${j}]`));
        push("user", [{ type: "tool_result", tool_use_id: m.tool_call_id, content }]);
        break;
      }
      case "function":
        unsupported(LABEL, `The legacy "function" role (${where})`, "send tool messages with tool_call_id");
      // eslint-disable-next-line no-fallthrough
      default:
        throw badRequest(`${where}.role must be system, developer, user, assistant or tool.`);
    }
  });
  if (!turns.length) unsupported(LABEL, "A request without user or assistant messages", "add a user message");
  if (turns[0]!.role !== "user") unsupported(LABEL, "A conversation that starts with an assistant turn", "start the conversation with a user message");
  return { system, messages: turns };
}

const nonEmpty = (b: Block) => !(b.type === "text" && !b.text);

/** Keeps an Anthropic `cache_control` marker a client put on a content part. */
function withCache(block: Block, part: ChatPart): Block {
  if (part.cache_control && typeof part.cache_control === "object") block.cache_control = part.cache_control;
  return block;
}

function userBlock(p: ChatPart, where: string): Block {
  switch (p.type) {
    case "text":
      return withCache({ type: "text", text: typeof p.text === "string" ? p.text : "" }, p);
    case "image_url": {
      const url = typeof p.image_url === "string" ? p.image_url : p.image_url?.url;
      if (typeof url !== "string" || !url) throw badRequest(`${where}.image_url.url is required.`);
      const data = parseDataUrl(url);
      if (data) return withCache({ type: "image", source: { type: "base64", media_type: data.mediaType, data: data.data } }, p);
      if (/^https?:\/\//i.test(url)) return withCache({ type: "image", source: { type: "url", url } }, p);
      throw badRequest(`${where}.image_url.url must be an http(s) URL or a base64 data URL.`);
    }
    case "file": {
      const f = p.file ?? {};
      if (f.file_id) unsupported(LABEL, `A file referenced by file_id (${where})`, "send the file inline as file_data");
      const data = typeof f.file_data === "string" ? parseDataUrl(f.file_data) : null;
      if (!data) throw badRequest(`${where}.file.file_data must be a base64 data URL.`);
      if (data.mediaType === "application/pdf") return withCache({ type: "document", source: { type: "base64", media_type: data.mediaType, data: data.data } }, p);
      if (data.mediaType.startsWith("text/")) return withCache({ type: "document", source: { type: "text", media_type: "text/plain", data: Buffer.from(data.data, "base64").toString("utf8") } }, p);
      if (data.mediaType.startsWith("image/")) return withCache({ type: "image", source: { type: "base64", media_type: data.mediaType, data: data.data } }, p);
      return unsupported(LABEL, `A file of type ${data.mediaType} (${where})`, "send PDF, text or images");
    }
    case "input_audio":
      return unsupported(LABEL, `Audio input (${where})`);
    default:
      return unsupported(LABEL, `A content part of type ${JSON.stringify(p.type)} (${where})`);
  }
}
