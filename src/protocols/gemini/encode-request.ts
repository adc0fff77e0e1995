// Chat pivot → Gemini generateContent request body (the model goes in the URL, not the body).
//
// - system/developer messages → systemInstruction; user → role "user"; assistant → role "model";
//   tool results → functionResponse parts in a user turn; consecutive same-role turns merge.
// - a functionResponse names its function: the name is looked up from the assistant tool call
//   whose id the tool message answers.
// - generationConfig carries temperature, topP, topK, maxOutputTokens, stopSequences,
//   candidateCount (n), seed, penalties, responseMimeType/responseSchema, thinkingConfig.
// - Gemini 3 models require the thought signature of a function call to come back with it; chat
//   history cannot carry one, so the documented validator-skip value is sent instead.
import { badRequest } from "../../errors.ts";
import { dropOrRefuse, type AdaptLog } from "../adapt.ts";
import {
  functionTools, isSet, maxTokensOf, parseArguments, parseDataUrl, partsOf, stopList, toolChoiceOf, unsupported, type ChatPart,
} from "../pivot.ts";
import {
  forEachMessage, imageUrlOf, inlineFileOf, noteDropped, rejectChatOnlyFields, structuredFormatOf, systemTextParts, toolCallIdOf, toolCallsOf, unknownRole,
} from "../chat-request.ts";
import type { ChatRequest, EncodeOptions, Json } from "../types.ts";
import { toGeminiParameters, toGeminiSchema } from "./schema.ts";

const LABEL = "gemini";
export const SKIP_THOUGHT_SIGNATURE = "skip_thought_signature_validator";
/** reasoning_effort → thinking budget in tokens (the mapping Google's own OpenAI-compatible endpoint uses). */
export const THINKING_BUDGET: Readonly<Record<string, number>> = { none: 0, minimal: 0, low: 1024, medium: 8192, high: 24576, xhigh: 32768 };
const MAX_STOP_SEQUENCES = 5;
/** Chat fields generateContent has no place for, which only tune the vendor's own behaviour. */
const VENDOR_ONLY = ["store", "metadata", "prompt_cache_key", "prompt_cache_retention", "safety_identifier", "user"] as const;

interface Content {
  role: "user" | "model";
  parts: Json[];
}

export function encodeGeminiRequest(req: ChatRequest, opts: EncodeOptions): Json {
  const log = opts.adapt;
  rejectInexpressible(req, log);
  noteDropped(req, log, VENDOR_ONLY);
  const { systemInstruction, contents } = convertMessages(req.messages, needsSignatureSkip(opts.model));
  const body: Json = { contents };
  if (systemInstruction) body.systemInstruction = systemInstruction;

  const gc: Json = {};
  if (isSet(req.temperature)) gc.temperature = req.temperature;
  if (isSet(req.top_p)) gc.topP = req.top_p;
  if (isSet(req.top_k)) gc.topK = req.top_k;
  const max = maxTokensOf(req);
  if (max !== null) gc.maxOutputTokens = max;
  const stops = stopList(req.stop);
  if (stops.length > MAX_STOP_SEQUENCES) unsupported(LABEL, `More than ${MAX_STOP_SEQUENCES} stop sequences`, `send at most ${MAX_STOP_SEQUENCES}`);
  if (stops.length) gc.stopSequences = stops;
  if (isSet(req.n, 1)) {
    if (typeof req.n !== "number" || !Number.isInteger(req.n) || req.n < 1) throw badRequest("`n` must be a positive integer.");
    gc.candidateCount = req.n;
  }
  if (isSet(req.seed)) gc.seed = req.seed;
  if (isSet(req.presence_penalty, 0)) gc.presencePenalty = req.presence_penalty;
  if (isSet(req.frequency_penalty, 0)) gc.frequencyPenalty = req.frequency_penalty;
  Object.assign(gc, responseFormatConfig(req.response_format));
  if (isSet(req.reasoning_effort)) {
    const budget = THINKING_BUDGET[String(req.reasoning_effort)];
    if (budget === undefined) unsupported(LABEL, `\`reasoning_effort\` "${req.reasoning_effort}"`, "send none, minimal, low, medium, high or xhigh");
    // Under adapt, a model the catalog says does not think (Gemini 1.5, 2.0) gets no thinking config, which it would refuse.
    if (log?.adapting && opts.hints?.reasons === false) log.note("reasoning_effort", "dropped");
    else {
      gc.thinkingConfig = { thinkingBudget: budget };
      log?.note("reasoning_effort", "mapped");
    }
  }
  if (Object.keys(gc).length) body.generationConfig = gc;

  const tools = functionTools(req.tools, LABEL);
  const choice = toolChoiceOf(req.tool_choice);
  if (tools.length) {
    body.tools = [{
      functionDeclarations: tools.map((t, i) => {
        const fd: Json = { name: t.name };
        if (t.description) fd.description = t.description;
        const params = toGeminiParameters(t.parameters, `tools[${i}].function.parameters`);
        if (params) fd.parameters = params;
        return fd;
      }),
    }];
    if (req.parallel_tool_calls === false) {
      dropOrRefuse(log, "parallel_tool_calls", () => unsupported(LABEL, "`parallel_tool_calls: false`", "Gemini cannot limit an answer to one function call; remove it"));
    }
    if (choice) {
      const fcc: Json =
        choice.kind === "auto" ? { mode: "AUTO" }
        : choice.kind === "none" ? { mode: "NONE" }
        : choice.kind === "required" ? { mode: "ANY" }
        : { mode: "ANY", allowedFunctionNames: [choice.name] };
      if (choice.kind === "function" && !tools.some((t) => t.name === choice.name)) throw badRequest(`\`tool_choice\` names "${choice.name}", which is not in \`tools\`.`);
      body.toolConfig = { functionCallingConfig: fcc };
    }
  } else if (choice && choice.kind !== "none" && choice.kind !== "auto") {
    throw badRequest("`tool_choice` requires `tools`.");
  }
  return body;
}

/** Gemini 1.x and 2.x do not validate thought signatures; later (and unknown) models do. */
function needsSignatureSkip(model: string): boolean {
  return !/^(models\/)?gemini-(1|2)(\.|-)/.test(model);
}

function rejectInexpressible(req: ChatRequest, log: AdaptLog | undefined): void {
  rejectChatOnlyFields(req, LABEL);
  if (isSet(req.verbosity, "medium")) dropOrRefuse(log, "verbosity", () => unsupported(LABEL, "`verbosity`"));
  else if (isSet(req.verbosity)) log?.note("verbosity", "dropped");
  if (isSet(req.service_tier, "auto", "default")) {
    dropOrRefuse(log, "service_tier", () => unsupported(LABEL, `\`service_tier\` "${req.service_tier}"`, "send \"auto\" or \"default\""));
  } else if (isSet(req.service_tier)) log?.note("service_tier", "dropped");
}

function responseFormatConfig(rf: unknown): Json {
  const f = structuredFormatOf(rf);
  if (!f) return {};
  if (f.type === "json_object") return { responseMimeType: "application/json" };
  return { responseMimeType: "application/json", responseSchema: toGeminiSchema(f.spec.schema, "response_format.json_schema.schema") };
}

function convertMessages(messages: Json[], skipSignatures: boolean): { systemInstruction: Json | null; contents: Content[] } {
  const system: Json[] = [];
  const contents: Content[] = [];
  const callNames = new Map<string, string>();
  const push = (role: Content["role"], parts: Json[]) => {
    if (!parts.length) return;
    const prev = contents[contents.length - 1];
    if (prev && prev.role === role) prev.parts.push(...parts);
    else contents.push({ role, parts });
  };

  forEachMessage(messages, (m, where) => {
    switch (m.role) {
      case "system":
      case "developer":
        for (const p of systemTextParts(m.content, where, LABEL)) system.push({ text: p.text });
        break;
      case "user":
        push("user", partsOf(m.content, `${where}.content`).map((p, j) => userPart(p, `${where}.content[${j}]`)).filter((p) => p.text !== ""));
        break;
      case "assistant": {
        const parts: Json[] = [];
        for (const p of partsOf(m.content, `${where}.content`)) {
          if (p.type === "text" && p.text) parts.push({ text: p.text });
          else if (p.type === "refusal" && p.refusal) parts.push({ text: p.refusal });
          else if (p.type !== "text" && p.type !== "refusal") unsupported(LABEL, `A ${p.type} part in an assistant message (${where})`);
        }
        toolCallsOf(m, where).forEach((tc, j) => {
          callNames.set(tc.id, tc.name);
          const part: Json = { functionCall: { name: tc.name, args: parseArguments(tc.arguments, `${tc.where}.function.arguments`) } };
          // Only the first call of a step carries a signature (parallel calls share it).
          if (skipSignatures && j === 0) part.thoughtSignature = SKIP_THOUGHT_SIGNATURE;
          parts.push(part);
        });
        push("model", parts);
        break;
      }
      case "tool": {
        const toolCallId = toolCallIdOf(m, where);
        const name = callNames.get(toolCallId) ?? (typeof m.name === "string" ? m.name : undefined);
        if (!name) throw badRequest(`${where}.tool_call_id "${toolCallId}" answers no earlier assistant tool call; Gemini needs the function's name.`);
        const parts = partsOf(m.content, `${where}.content`);
        if (parts.some((p) => p.type !== "text")) unsupported(LABEL, `A non-text tool result (${where})`, "send the tool result as text");
        push("user", [{ functionResponse: { name, response: toolResponse(parts.map((p) => p.text ?? "").join("")) } }]);
        break;
      }
      default:
        unknownRole(m, where, LABEL);
    }
  });
  if (!contents.length) unsupported(LABEL, "A request without user or assistant messages", "add a user message");
  return { systemInstruction: system.length ? { parts: system } : null, contents };
}

/** A tool result is a string in chat; Gemini wants an object: a JSON object result is sent as is, anything else under `output`. */
function toolResponse(text: string): Json {
  try {
    const v = JSON.parse(text);
    if (v && typeof v === "object" && !Array.isArray(v)) return v;
  } catch { /* not JSON: plain text */ }
  return { output: text };
}

const MIME_BY_EXT: Record<string, string> = {
  png: "image/png", jpg: "image/jpeg", jpeg: "image/jpeg", gif: "image/gif", webp: "image/webp", heic: "image/heic", heif: "image/heif", pdf: "application/pdf",
};

function userPart(p: ChatPart, where: string): Json {
  switch (p.type) {
    case "text":
      return { text: typeof p.text === "string" ? p.text : "" };
    case "image_url": {
      const url = imageUrlOf(p, where);
      const data = parseDataUrl(url);
      if (data) return { inlineData: { mimeType: data.mediaType, data: data.data } };
      if (!/^https?:\/\//i.test(url)) throw badRequest(`${where}.image_url.url must be an http(s) URL or a base64 data URL.`);
      const ext = /\.([a-z0-9]+)(?:[?#]|$)/i.exec(new URL(url).pathname)?.[1]?.toLowerCase();
      return { fileData: { mimeType: (ext && MIME_BY_EXT[ext]) || "image/jpeg", fileUri: url } };
    }
    case "input_audio": {
      const a = p.input_audio ?? {};
      if (typeof a.data !== "string" || typeof a.format !== "string") throw badRequest(`${where}.input_audio needs data and format.`);
      return { inlineData: { mimeType: a.format === "mp3" ? "audio/mp3" : `audio/${a.format}`, data: a.data } };
    }
    case "file": {
      const data = inlineFileOf(p, where, LABEL);
      return { inlineData: { mimeType: data.mediaType, data: data.data } };
    }
    default:
      return unsupported(LABEL, `A content part of type ${JSON.stringify(p.type)} (${where})`);
  }
}
