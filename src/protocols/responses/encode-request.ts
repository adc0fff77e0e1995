// Chat pivot → a Responses request, for lanes that speak only Responses (the `sub` lane):
// this is how /v1/chat/completions works there.
//
// Leading system/developer messages become `instructions`; later ones stay in place as
// developer messages. Assistant tool calls become function_call items, tool messages
// function_call_output items. The request is stateless (`store: false`), like a chat call.
import { badRequest } from "../../errors.ts";
import { functionTools, isSet, maxTokensOf, partsOf, stopList, textOf, toolChoiceOf, unsupported, type ChatPart } from "../pivot.ts";
import type { ChatRequest, Json } from "../types.ts";
import { forEachMessage, imageUrlOf, rejectChatOnlyFields, structuredFormatOf, toolCallIdOf, toolCallsOf, unknownRole } from "../chat-request.ts";

const LABEL = "Responses";

export function encodeResponsesRequest(req: ChatRequest, opts: { model: string; stream: boolean }): Json {
  rejectInexpressible(req);
  const { instructions, input } = convertMessages(req.messages);
  const body: Json = { model: opts.model, input, store: false };
  if (instructions) body.instructions = instructions;
  if (opts.stream) body.stream = true;
  const max = maxTokensOf(req);
  if (max !== null) body.max_output_tokens = max;
  for (const k of ["temperature", "top_p", "parallel_tool_calls", "user", "safety_identifier", "prompt_cache_key", "service_tier", "metadata"] as const) {
    if (isSet(req[k])) body[k] = req[k];
  }
  if (isSet(req.reasoning_effort)) body.reasoning = { effort: req.reasoning_effort };
  const text: Json = {};
  const format = formatOf(req.response_format);
  if (format) text.format = format;
  if (isSet(req.verbosity)) text.verbosity = req.verbosity;
  if (Object.keys(text).length) body.text = text;

  const tools = functionTools(req.tools, LABEL).map((t) => {
    const tool: Json = { type: "function", name: t.name, parameters: t.parameters ?? { type: "object", properties: {} } };
    if (t.description !== undefined) tool.description = t.description;
    // Responses makes function tools strict unless told otherwise; chat does the opposite.
    tool.strict = t.strict ?? false;
    return tool;
  });
  if (tools.length) body.tools = tools;
  const choice = toolChoiceOf(req.tool_choice);
  if (choice) body.tool_choice = choice.kind === "function" ? { type: "function", name: choice.name } : choice.kind;
  return body;
}

function rejectInexpressible(req: ChatRequest): void {
  if (stopList(req.stop).length) unsupported(LABEL, "`stop` sequences", "remove `stop`");
  if (isSet(req.n, 1)) unsupported(LABEL, "`n` > 1 (several choices)", "send n = 1 and repeat the request");
  rejectChatOnlyFields(req, LABEL);
  if (isSet(req.presence_penalty, 0)) unsupported(LABEL, "`presence_penalty`");
  if (isSet(req.frequency_penalty, 0)) unsupported(LABEL, "`frequency_penalty`");
}

/** `response_format` → the Responses `text.format` object (the checks are the shared ones). */
function formatOf(rf: unknown): Json | null {
  const f = structuredFormatOf(rf);
  if (f === null || f.type === "json_object") return f;
  const js = f.spec;
  const out: Json = { type: "json_schema", name: js.name ?? "response", schema: js.schema };
  if (js.strict !== undefined) out.strict = js.strict;
  if (js.description !== undefined) out.description = js.description;
  return out;
}

function convertMessages(messages: Json[]): { instructions: string; input: Json[] } {
  const instructions: string[] = [];
  const input: Json[] = [];
  forEachMessage(messages, (m, where) => {
    switch (m.role) {
      case "system":
      case "developer": {
        const text = textOf(m.content);
        if (!input.length) { if (text) instructions.push(text); }
        else input.push({ type: "message", role: "developer", content: [{ type: "input_text", text }] });
        break;
      }
      case "user":
        input.push({ type: "message", role: "user", content: partsOf(m.content, `${where}.content`).map((p, j) => inputPart(p, `${where}.content[${j}]`)) });
        break;
      case "assistant": {
        const parts = partsOf(m.content, `${where}.content`);
        const text = parts.filter((p) => p.type === "text").map((p) => p.text ?? "").join("");
        if (parts.some((p) => p.type !== "text" && p.type !== "refusal")) unsupported(LABEL, `A non-text part in an assistant message (${where})`);
        if (text) input.push({ type: "message", role: "assistant", content: [{ type: "output_text", text, annotations: [] }] });
        for (const tc of toolCallsOf(m, where)) {
          input.push({ type: "function_call", call_id: tc.id, name: tc.name, arguments: typeof tc.arguments === "string" ? tc.arguments : JSON.stringify(tc.arguments ?? {}) });
        }
        break;
      }
      case "tool":
        input.push({ type: "function_call_output", call_id: toolCallIdOf(m, where), output: textOf(m.content) });
        break;
      default:
        unknownRole(m, where, LABEL);
    }
  });
  return { instructions: instructions.join("\n\n"), input };
}

function inputPart(p: ChatPart, where: string): Json {
  switch (p.type) {
    case "text":
      return { type: "input_text", text: typeof p.text === "string" ? p.text : "" };
    case "image_url": {
      return { type: "input_image", image_url: imageUrlOf(p, where), detail: p.image_url?.detail ?? "auto" };
    }
    case "file": {
      const f = p.file ?? {};
      const out: Json = { type: "input_file" };
      if (f.file_id) out.file_id = f.file_id;
      if (f.file_data) out.file_data = f.file_data;
      if (f.filename) out.filename = f.filename;
      if (!out.file_id && !out.file_data) throw badRequest(`${where}.file needs file_id or file_data.`);
      return out;
    }
    default:
      return unsupported(LABEL, `A content part of type ${JSON.stringify(p.type)} (${where})`);
  }
}
