// Chat pivot → Anthropic Messages request body.
//
// Decisions (documented in docs/protocol-translation.md):
// - system/developer messages, wherever they sit, become the top-level `system` blocks in order.
// - turns alternate: consecutive same-role turns merge; tool results become `tool_result` blocks
//   in the following user turn (before any user text, as Anthropic requires).
// - `max_tokens` is always sent: max_completion_tokens, else max_tokens, else 4096.
// - `response_format` json_schema / json_object become one forced tool (JSON_TOOL_NAME) whose
//   input is the JSON answer; the decoders turn that tool's input back into message text.
// - what Messages cannot express is a 400 unsupported_feature naming it, never clamped; under the
//   `adapt` policy (adapt.ts) `reasoning_effort` becomes extended thinking and fields that only
//   tune OpenAI's behaviour (`verbosity`, other service tiers) are dropped instead.
import { badRequest } from "../../errors.ts";
import { dropOrRefuse, type AdaptLog } from "../adapt.ts";
import {
  functionTools, isSet, maxTokensOf, parseArguments, parseDataUrl, partsOf, stopList, toolChoiceOf, unsupported, type ChatPart,
} from "../pivot.ts";
import {
  forEachMessage, imageUrlOf, inlineFileOf, noteDropped, rejectChatOnlyFields, structuredFormatOf, systemTextParts, toolCallIdOf, toolCallsOf, unknownRole,
} from "../chat-request.ts";
import type { ChatRequest, EncodeOptions, Json, ModelHints } from "../types.ts";

export const DEFAULT_MAX_TOKENS = 4096;
/**
 * `reasoning_effort` → extended-thinking budget in tokens (0: no thinking, Anthropic's default).
 * Documented in docs/protocol-translation.md.
 */
export const THINKING_BUDGET: Readonly<Record<string, number>> = { none: 0, minimal: 0, low: 1024, medium: 4096, high: 16384, xhigh: 32768 };
/** Anthropic's smallest thinking budget. */
export const MIN_THINKING_BUDGET = 1024;
/** Chat fields the Messages API has no place for, which only tune the vendor's own behaviour. */
const VENDOR_ONLY = ["store", "metadata", "prompt_cache_key", "prompt_cache_retention", "safety_identifier", "seed"] as const;
/** The forced tool that carries a `response_format` answer; a client tool may not use this name. */
export const JSON_TOOL_NAME = "json_response";
const LABEL = "anthropic";

type Block = Json & { type: string };
interface Turn {
  role: "user" | "assistant";
  content: Block[];
}

export function encodeAnthropicRequest(req: ChatRequest, opts: EncodeOptions): Json {
  const log = opts.adapt;
  rejectInexpressible(req, log);
  noteDropped(req, log, VENDOR_ONLY);
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
  if (isSet(req.reasoning_effort) && log) mapEffort(req, body, log, opts.hints ?? {});
  return body;
}

/**
 * Under adapt, `reasoning_effort` → `thinking: {type: "enabled", budget_tokens}` (THINKING_BUDGET).
 * The budget must stay below `max_tokens`: without a client limit, max_tokens grows by the budget
 * so the answer keeps its default room (never past the model's catalog maximum); with one (which
 * the gateway may not exceed, CONTRACT §7), a budget that does not fit becomes half the limit, and
 * below Anthropic's minimum thinking is left out. A model the catalog says does not think gets none.
 * Thinking is left out too (the effort dropped, not refused: it only tunes how long the model
 * thinks) where Anthropic refuses it together with what the request asks for: a temperature other
 * than 1, top_p below 0.95, top_k, a forced tool (tool_choice, response_format), or a request that
 * continues a tool call whose assistant turn carries no signed thinking block (chat history has
 * none to send back; Anthropic requires one there once thinking is on).
 */
function mapEffort(req: ChatRequest, body: Json, log: AdaptLog, hints: ModelHints): void {
  const effort = String(req.reasoning_effort);
  const budget = THINKING_BUDGET[effort];
  if (budget === undefined) unsupported(LABEL, `\`reasoning_effort\` "${effort}"`, "send none, minimal, low, medium, high or xhigh");
  if (budget === 0 || hints.reasons === false || thinkingExcluded(body)) {
    log.note("reasoning_effort", budget === 0 ? "mapped" : "dropped");
    return;
  }
  const limit = maxTokensOf(req) ?? Math.min(DEFAULT_MAX_TOKENS + budget, hints.maxOutputTokens ?? Infinity);
  const b = budget < limit ? budget : Math.floor(limit / 2);
  if (b < MIN_THINKING_BUDGET) {
    log.note("reasoning_effort", "dropped");
    return;
  }
  body.max_tokens = limit;
  body.thinking = { type: "enabled", budget_tokens: b };
  log.note("reasoning_effort", "mapped");
}

/** What Anthropic refuses together with extended thinking (see mapEffort). */
function thinkingExcluded(body: Json): boolean {
  if (typeof body.temperature === "number" && body.temperature !== 1) return true;
  if (typeof body.top_p === "number" && body.top_p < 0.95) return true;
  if (body.top_k !== undefined) return true;
  const tc = body.tool_choice?.type;
  if (tc === "any" || tc === "tool") return true;
  const turns: Json[] = body.messages;
  const last = turns[turns.length - 1];
  const prev = turns[turns.length - 2];
  const continuesToolUse = last?.role === "user" && last.content.some((b: Json) => b.type === "tool_result")
    && prev?.role === "assistant" && prev.content.some((b: Json) => b.type === "tool_use");
  return continuesToolUse && prev.content[0]?.type !== "thinking" && prev.content[0]?.type !== "redacted_thinking";
}

/** Chat parameters with no Messages equivalent whose loss would change the answer: 400. */
function rejectInexpressible(req: ChatRequest, log: AdaptLog | undefined): void {
  if (isSet(req.n, 1)) unsupported(LABEL, "`n` > 1 (several choices)", "send n = 1 and repeat the request");
  rejectChatOnlyFields(req, LABEL);
  if (isSet(req.presence_penalty, 0)) unsupported(LABEL, "`presence_penalty`");
  if (isSet(req.frequency_penalty, 0)) unsupported(LABEL, "`frequency_penalty`");
  if (isSet(req.reasoning_effort) && !log?.adapting) unsupported(LABEL, "`reasoning_effort`", "Anthropic's extended thinking cannot be carried through chat tool-call history; remove it");
  if (isSet(req.verbosity, "medium")) dropOrRefuse(log, "verbosity", () => unsupported(LABEL, "`verbosity`"));
  else if (isSet(req.verbosity)) log?.note("verbosity", "dropped");
  if (isSet(req.service_tier, "auto", "default")) {
    dropOrRefuse(log, "service_tier", () => unsupported(LABEL, `\`service_tier\` "${req.service_tier}"`, "send \"auto\" or \"default\""));
  }
}

function responseFormatTool(rf: unknown): Json | null {
  const f = structuredFormatOf(rf);
  if (!f) return null;
  if (f.type === "json_object") {
    return { name: JSON_TOOL_NAME, description: "Respond with the final answer as a JSON object.", input_schema: { type: "object" } };
  }
  const js = f.spec;
  if (js.schema.type !== "object") unsupported(LABEL, "A `response_format` schema whose root is not an object", "wrap the answer in an object");
  const desc = [`Respond with the final answer${js.name ? ` (${js.name})` : ""} as JSON matching this schema.`, js.description].filter(Boolean).join(" ");
  return { name: JSON_TOOL_NAME, description: desc, input_schema: js.schema };
}

function convertMessages(messages: Json[]): { system: Block[]; messages: Turn[] } {
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

  forEachMessage(messages, (m, where) => {
    switch (m.role) {
      case "system":
      case "developer":
        for (const p of systemTextParts(m.content, where, LABEL)) system.push(withCache({ type: "text", text: p.text }, p));
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
        for (const tc of toolCallsOf(m, where)) {
          blocks.push({ type: "tool_use", id: tc.id, name: tc.name, input: parseArguments(tc.arguments, `${tc.where}.function.arguments`) });
        }
        push("assistant", blocks.filter(nonEmpty));
        break;
      }
      case "tool": {
        const toolCallId = toolCallIdOf(m, where);
        const parts = partsOf(m.content, `${where}.content`);
        const content = parts.every((p) => p.type === "text")
          ? parts.map((p) => p.text ?? "").join("")
          : parts.map((p, j) => userBlock(p, `${where}.content[${j}]`));
        push("user", [{ type: "tool_result", tool_use_id: toolCallId, content }]);
        break;
      }
      default:
        unknownRole(m, where, LABEL);
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
      const url = imageUrlOf(p, where);
      const data = parseDataUrl(url);
      if (data) return withCache({ type: "image", source: { type: "base64", media_type: data.mediaType, data: data.data } }, p);
      if (/^https?:\/\//i.test(url)) return withCache({ type: "image", source: { type: "url", url } }, p);
      throw badRequest(`${where}.image_url.url must be an http(s) URL or a base64 data URL.`);
    }
    case "file": {
      const data = inlineFileOf(p, where, LABEL);
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
