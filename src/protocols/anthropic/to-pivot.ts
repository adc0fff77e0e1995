// An Anthropic Messages request (POST /v1/messages) → the chat pivot, for lanes that do not speak
// Messages natively. What chat cannot carry and would change the answer (server tools, MCP
// servers, containers, top_k) is refused as unsupported_feature, so the lane fails over to one
// that can serve (CONTRACT §8). Thinking blocks of earlier turns are dropped: only the model
// that signed them can read them. `cache_control` markers are dropped too: prompt caching is
// Anthropic's, and an Anthropic lane gets a Messages client's request untranslated anyway. Under
// the `adapt` policy (adapt.ts) `context_management` (Anthropic's own context editing) is dropped,
// and `system` turns inside `messages` (Claude Code sends them) become chat system messages in place.
import { badRequest, GatewayError } from "../../errors.ts";
import { dropOrRefuse, type AdaptLog } from "../adapt.ts";
import { isSet, unsupported } from "../pivot.ts";
import type { ChatRequest, Json } from "../types.ts";

const LABEL = "non-Anthropic";

/** Anthropic extended-thinking budget → chat reasoning_effort (the closest effort that allows it). */
export function effortOfBudget(budget: number): string {
  if (budget <= 1024) return "low";
  if (budget <= 8192) return "medium";
  return "high";
}

export function anthropicToPivot(body: Json, adapt?: AdaptLog): ChatRequest {
  if (typeof body.model !== "string" || !body.model) throw new GatewayError(400, "The request needs a `model` string.");
  if (!Array.isArray(body.messages)) throw new GatewayError(400, "The request needs `messages`: an array of user and assistant turns.");
  rejectInexpressible(body, adapt);

  const messages: Json[] = [];
  const system = systemParts(body.system);
  if (system.length) messages.push({ role: "system", content: system });
  body.messages.forEach((m: unknown, i: number) => convertTurn(m, `messages[${i}]`, messages, adapt));

  const req: ChatRequest = { model: body.model, messages };
  if (body.stream === true) {
    req.stream = true;
    req.stream_options = { include_usage: true };
  }
  if (isSet(body.max_tokens)) req.max_tokens = body.max_tokens;
  if (isSet(body.temperature)) req.temperature = body.temperature;
  if (isSet(body.top_p)) req.top_p = body.top_p;
  if (isSet(body.stop_sequences)) {
    if (!Array.isArray(body.stop_sequences) || !body.stop_sequences.every((s: unknown) => typeof s === "string")) throw badRequest("`stop_sequences` must be an array of strings.");
    if (body.stop_sequences.length) req.stop = body.stop_sequences;
  }
  if (typeof body.metadata?.user_id === "string" && body.metadata.user_id) req.user = body.metadata.user_id;
  if (body.service_tier === "auto") req.service_tier = "auto";
  else if (body.service_tier === "standard_only") req.service_tier = "default";
  else if (isSet(body.service_tier)) throw badRequest("`service_tier` must be \"auto\" or \"standard_only\".");

  const thinking = body.thinking;
  if (isSet(thinking)) {
    if (typeof thinking !== "object") throw badRequest("`thinking` must be an object.");
    if (thinking.type === "enabled") {
      if (!Number.isInteger(thinking.budget_tokens) || thinking.budget_tokens < 1) throw badRequest("`thinking.budget_tokens` must be a positive integer.");
      req.reasoning_effort = effortOfBudget(thinking.budget_tokens);
    } else if (thinking.type !== "disabled" && thinking.type !== "adaptive") {
      throw badRequest("`thinking.type` must be \"enabled\", \"disabled\" or \"adaptive\".");
    }
  }

  const tools = toolsOf(body.tools);
  if (tools.length) req.tools = tools;
  const tc = body.tool_choice;
  if (isSet(tc)) {
    if (typeof tc !== "object") throw badRequest("`tool_choice` must be an object with a `type`.");
    if (tc.type === "auto") req.tool_choice = "auto";
    else if (tc.type === "any") req.tool_choice = "required";
    else if (tc.type === "none") req.tool_choice = "none";
    else if (tc.type === "tool" && typeof tc.name === "string") req.tool_choice = { type: "function", function: { name: tc.name } };
    else throw badRequest("`tool_choice.type` must be auto, any, tool (with `name`) or none.");
    if (tc.disable_parallel_tool_use === true && tools.length) req.parallel_tool_calls = false;
  }
  return req;
}

function rejectInexpressible(body: Json, adapt: AdaptLog | undefined): void {
  if (isSet(body.top_k)) unsupported(LABEL, "`top_k`", "remove it or route the request to an Anthropic lane");
  if (isSet(body.mcp_servers)) unsupported(LABEL, "`mcp_servers`", "route the request to an Anthropic lane");
  if (isSet(body.container)) unsupported(LABEL, "`container`", "route the request to an Anthropic lane");
  // Context editing (clearing old thinking or tool results) is how Anthropic trims its own context;
  // the answer to the messages as sent is still the answer asked for.
  if (isSet(body.context_management)) {
    dropOrRefuse(adapt, "context_management", () => unsupported(LABEL, "`context_management`", "route the request to an Anthropic lane"));
  }
}

/** A `system` turn's text (a string or text blocks) as chat text parts. */
function systemTurnParts(content: unknown, where: string): Json[] {
  if (typeof content === "string") return content ? [{ type: "text", text: content }] : [];
  if (!Array.isArray(content)) throw badRequest(`${where}.content must be a string or an array of text blocks.`);
  return content.map((b: Json, j: number) => {
    if (b?.type !== "text" || typeof b.text !== "string") throw badRequest(`${where}.content[${j}] must be a text block in a system turn.`);
    return { type: "text", text: b.text };
  }).filter((p: Json) => p.text);
}

function systemParts(system: unknown): Json[] {
  if (system === undefined || system === null || system === "") return [];
  if (typeof system === "string") return [{ type: "text", text: system }];
  if (!Array.isArray(system)) throw badRequest("`system` must be a string or an array of text blocks.");
  return system.map((b, i) => {
    if (!b || typeof b !== "object" || b.type !== "text" || typeof b.text !== "string") throw badRequest(`system[${i}] must be a text block ({type: "text", text}).`);
    return { type: "text", text: b.text };
  });
}

function toolsOf(tools: unknown): Json[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw badRequest("`tools` must be an array.");
  return tools.map((t, i) => {
    if (!t || typeof t !== "object") throw badRequest(`tools[${i}] must be an object.`);
    // Server tools (web search, bash, text editor, code execution…) carry a versioned type and run at Anthropic.
    if (t.type !== undefined && t.type !== null && t.type !== "custom") unsupported(LABEL, `The Anthropic server tool ${JSON.stringify(t.type)} (tools[${i}])`, "send custom tools only, or route to an Anthropic lane");
    if (typeof t.name !== "string" || !t.name) throw badRequest(`tools[${i}].name is required.`);
    const fn: Json = { name: t.name, parameters: t.input_schema ?? { type: "object", properties: {} } };
    if (typeof t.description === "string") fn.description = t.description;
    return { type: "function", function: fn };
  });
}

function convertTurn(raw: unknown, where: string, out: Json[], adapt: AdaptLog | undefined): void {
  if (!raw || typeof raw !== "object") throw badRequest(`${where} must be an object with \`role\` and \`content\`.`);
  const m = raw as Json;
  if (m.role === "system" && adapt?.adapting) {
    const parts = systemTurnParts(m.content, where);
    if (parts.length) out.push({ role: "system", content: parts });
    adapt.note("messages[].role", "mapped");
    return;
  }
  if (m.role !== "user" && m.role !== "assistant") throw badRequest(`${where}.role must be "user" or "assistant".`);
  if (typeof m.content === "string") {
    out.push({ role: m.role, content: m.content });
    return;
  }
  if (!Array.isArray(m.content)) throw badRequest(`${where}.content must be a string or an array of content blocks.`);
  if (m.role === "assistant") {
    let text = "";
    const calls: Json[] = [];
    m.content.forEach((b: Json, j: number) => {
      const w = `${where}.content[${j}]`;
      switch (b?.type) {
        case "text":
          text += typeof b.text === "string" ? b.text : "";
          return;
        case "tool_use":
          if (typeof b.id !== "string" || typeof b.name !== "string") throw badRequest(`${w} (tool_use) needs \`id\` and \`name\`.`);
          calls.push({ id: b.id, type: "function", function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
          return;
        case "thinking":
        case "redacted_thinking":
          return; // signed reasoning of Anthropic's own models: nothing another model can use
        default:
          return unsupported(LABEL, `A ${JSON.stringify(b?.type)} block in an assistant turn (${w})`, "send text and tool_use blocks");
      }
    });
    const msg: Json = { role: "assistant", content: text || null };
    if (calls.length) msg.tool_calls = calls;
    if (text || calls.length) out.push(msg);
    return;
  }
  // A user turn: tool results become tool messages (they answer the assistant turn before, so they
  // come first), the rest one user message.
  const parts: Json[] = [];
  m.content.forEach((b: Json, j: number) => {
    const w = `${where}.content[${j}]`;
    if (b?.type === "tool_result") {
      if (typeof b.tool_use_id !== "string") throw badRequest(`${w} (tool_result) needs \`tool_use_id\`.`);
      out.push({ role: "tool", tool_call_id: b.tool_use_id, content: toolResultContent(b, w) });
      return;
    }
    const p = userPart(b, w);
    if (p) parts.push(p);
  });
  if (parts.length) out.push({ role: "user", content: parts });
}

function toolResultContent(b: Json, where: string): string | Json[] {
  const prefix = b.is_error === true ? "Error: " : "";
  if (b.content === undefined || b.content === null) return prefix;
  if (typeof b.content === "string") return prefix + b.content;
  if (!Array.isArray(b.content)) throw badRequest(`${where}.content must be a string or an array of blocks.`);
  const parts = b.content.map((c: Json, k: number) => userPart(c, `${where}.content[${k}]`)).filter((p: Json | null): p is Json => p !== null);
  if (parts.every((p: Json) => p.type === "text")) return prefix + parts.map((p: Json) => p.text).join("");
  return prefix ? [{ type: "text", text: prefix }, ...parts] : parts;
}

function userPart(b: Json, where: string): Json | null {
  switch (b?.type) {
    case "text":
      if (typeof b.text !== "string") throw badRequest(`${where}.text must be a string.`);
      return { type: "text", text: b.text };
    case "image": {
      const s = b.source ?? {};
      if (s.type === "base64" && typeof s.data === "string") return { type: "image_url", image_url: { url: `data:${s.media_type ?? "image/png"};base64,${s.data}` } };
      if (s.type === "url" && typeof s.url === "string") return { type: "image_url", image_url: { url: s.url } };
      return unsupported(LABEL, `An image whose source is ${JSON.stringify(s.type)} (${where})`, "send base64 or url images");
    }
    case "document": {
      const s = b.source ?? {};
      if (s.type === "base64" && typeof s.data === "string") return { type: "file", file: { file_data: `data:${s.media_type ?? "application/pdf"};base64,${s.data}`, ...(typeof b.title === "string" ? { filename: b.title } : {}) } };
      if (s.type === "text" && typeof s.data === "string") return { type: "text", text: s.data };
      return unsupported(LABEL, `A document whose source is ${JSON.stringify(s.type)} (${where})`, "send base64 or text documents");
    }
    case "thinking":
    case "redacted_thinking":
      return null;
    default:
      return unsupported(LABEL, `A content block of type ${JSON.stringify(b?.type)} (${where})`, "send text, image, document and tool_result blocks");
  }
}
