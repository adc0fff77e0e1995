// A Gemini generateContent request (POST /v1beta/models/{model}:generateContent) → the chat pivot,
// for lanes that do not speak Gemini. The model and the streaming choice come from the URL; the
// route puts them in the body as `model` and `stream` before this runs.
//
// - systemInstruction → a system message; role "user" → user, "model" → assistant; the
//   functionCall parts of a model turn → tool_calls (their `id` kept, or one made up), the
//   functionResponse parts of the next user turn → tool messages answering them (by `id`, else
//   the earliest open call of that name).
// - Thought parts of earlier turns and their thoughtSignature are dropped: only the model that
//   wrote them can read them.
// - generationConfig: maxOutputTokens, temperature, topP, stopSequences, candidateCount, seed,
//   penalties and responseMimeType/responseSchema/responseJsonSchema map to their chat fields.
//   topK and thinkingConfig only tune how the vendor samples and how long it thinks: a lane of
//   another protocol keeps its own (thinkingConfig.includeThoughts still decides whether the
//   answer shows the lane's reasoning, see from-pivot.ts). safetySettings are Google's filters.
// - What would change the answer's meaning and chat cannot carry (Google's hosted tools, a
//   cachedContent, logprobs, audio or image output) is refused as unsupported_feature: the lane
//   fails over to one that can serve, a google lane passing the request through (CONTRACT §8).
import { badRequest } from "../../errors.ts";
import { isSet, unsupported } from "../pivot.ts";
import type { ChatRequest, Json } from "../types.ts";
import { fromGeminiSchema } from "./json-schema.ts";

const LABEL = "non-Gemini";
const HINT = "route the request to a google lane";

/** Whether the client asked to see the model's thoughts (generationConfig.thinkingConfig.includeThoughts). */
export const includesThoughts = (body: Json): boolean => body.generationConfig?.thinkingConfig?.includeThoughts === true;

export function geminiToPivot(body: Json): ChatRequest {
  if (typeof body.model !== "string" || !body.model) throw badRequest("The request needs a model in its path: /v1beta/models/{model}:generateContent.");
  if (!Array.isArray(body.contents)) throw badRequest("`contents` is required: an array of user and model turns.");
  rejectInexpressible(body);

  const messages: Json[] = [];
  const system = systemText(body.systemInstruction);
  if (system.length) messages.push({ role: "system", content: system });
  const calls = new OpenCalls();
  body.contents.forEach((c: unknown, i: number) => convertContent(c, `contents[${i}]`, messages, calls));

  const req: ChatRequest = { model: body.model, messages };
  if (body.stream === true) {
    req.stream = true;
    req.stream_options = { include_usage: true };
  }
  Object.assign(req, generationFields(body.generationConfig));
  const tools = toolsOf(body.tools);
  if (tools.length) req.tools = tools;
  const choice = toolChoiceOf(body.toolConfig, tools);
  if (choice !== undefined) req.tool_choice = choice;
  return req;
}

function rejectInexpressible(body: Json): void {
  if (isSet(body.cachedContent)) unsupported(LABEL, "`cachedContent`", `a cached context lives at Google; ${HINT}`);
}

function systemText(si: unknown): Json[] {
  if (si === undefined || si === null) return [];
  if (typeof si === "string") return si ? [{ type: "text", text: si }] : [];
  if (typeof si !== "object" || !Array.isArray((si as Json).parts)) throw badRequest("`systemInstruction` must be a Content object with `parts`.");
  return (si as Json).parts.map((p: Json, i: number) => {
    if (!p || typeof p !== "object" || typeof p.text !== "string") unsupported(LABEL, `A systemInstruction part other than text (systemInstruction.parts[${i}])`, "send text parts");
    return { type: "text", text: p.text };
  }).filter((p: Json) => p.text !== "");
}

/** Function calls of the conversation still waiting for their response, in order. */
class OpenCalls {
  private open: Array<{ id: string; name: string }> = [];
  private seq = 0;

  add(id: unknown, name: string): string {
    const callId = typeof id === "string" && id ? id : `call_${++this.seq}_${name}`.slice(0, 64);
    this.open.push({ id: callId, name });
    return callId;
  }

  /** The call a functionResponse answers: its `id`, else the earliest open call of that name. */
  take(id: unknown, name: string): string | null {
    let i = typeof id === "string" && id ? this.open.findIndex((c) => c.id === id) : -1;
    if (i < 0) i = this.open.findIndex((c) => c.name === name);
    if (i < 0) return null;
    return this.open.splice(i, 1)[0]!.id;
  }
}

function convertContent(raw: unknown, where: string, out: Json[], calls: OpenCalls): void {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw badRequest(`${where} must be a Content object with \`role\` and \`parts\`.`);
  const c = raw as Json;
  const role = c.role ?? "user";
  if (role !== "user" && role !== "model" && role !== "function") throw badRequest(`${where}.role must be "user" or "model".`);
  if (!Array.isArray(c.parts)) throw badRequest(`${where}.parts must be an array of parts.`);
  if (role === "model") {
    let text = "";
    const toolCalls: Json[] = [];
    c.parts.forEach((p: Json, j: number) => {
      const w = `${where}.parts[${j}]`;
      if (!p || typeof p !== "object") throw badRequest(`${w} must be a Part object.`);
      if (p.thought === true) return; // reasoning another model wrote: nothing this lane can read
      if (typeof p.text === "string") text += p.text;
      else if (p.functionCall) {
        const fc = p.functionCall;
        if (typeof fc.name !== "string" || !fc.name) throw badRequest(`${w}.functionCall.name is required.`);
        if (fc.args !== undefined && fc.args !== null && (typeof fc.args !== "object" || Array.isArray(fc.args))) throw badRequest(`${w}.functionCall.args must be an object.`);
        const id = calls.add(fc.id, fc.name);
        toolCalls.push({ id, type: "function", function: { name: fc.name, arguments: JSON.stringify(fc.args ?? {}) } });
      } else if (p.thoughtSignature !== undefined && Object.keys(p).every((k) => k === "thoughtSignature")) return;
      else unsupported(LABEL, `A ${partKind(p)} part in a model turn (${w})`, "send text and functionCall parts");
    });
    const msg: Json = { role: "assistant", content: text || null };
    if (toolCalls.length) msg.tool_calls = toolCalls;
    if (text || toolCalls.length) out.push(msg);
    return;
  }
  // A user turn: function responses become tool messages first (they answer the model turn
  // before), the other parts one user message.
  const parts: Json[] = [];
  c.parts.forEach((p: Json, j: number) => {
    const w = `${where}.parts[${j}]`;
    if (!p || typeof p !== "object") throw badRequest(`${w} must be a Part object.`);
    if (p.functionResponse) {
      const fr = p.functionResponse;
      if (typeof fr.name !== "string" || !fr.name) throw badRequest(`${w}.functionResponse.name is required.`);
      const id = calls.take(fr.id, fr.name);
      if (!id) throw badRequest(`${w}.functionResponse answers no earlier functionCall named "${fr.name}".`);
      out.push({ role: "tool", tool_call_id: id, content: responseText(fr.response) });
      return;
    }
    const part = userPart(p, w);
    if (part) parts.push(part);
  });
  if (parts.length) out.push({ role: "user", content: parts });
}

/** A function's response object → the tool message's text: a lone `output` string as it is, anything else as JSON. */
function responseText(response: unknown): string {
  if (response && typeof response === "object" && !Array.isArray(response)) {
    const keys = Object.keys(response);
    const r = response as Json;
    if (keys.length === 1 && typeof r.output === "string") return r.output;
  }
  return JSON.stringify(response ?? {});
}

const AUDIO_FORMAT: Record<string, string> = { "audio/wav": "wav", "audio/x-wav": "wav", "audio/mp3": "mp3", "audio/mpeg": "mp3" };

function userPart(p: Json, where: string): Json | null {
  if (p.thought === true) return null;
  if (typeof p.text === "string") return p.text ? { type: "text", text: p.text } : null;
  if (p.inlineData) {
    const d = p.inlineData;
    if (typeof d.data !== "string" || typeof d.mimeType !== "string") throw badRequest(`${where}.inlineData needs \`mimeType\` and \`data\`.`);
    const mime = d.mimeType.toLowerCase();
    if (mime.startsWith("image/")) return { type: "image_url", image_url: { url: `data:${mime};base64,${d.data}` } };
    if (AUDIO_FORMAT[mime]) return { type: "input_audio", input_audio: { data: d.data, format: AUDIO_FORMAT[mime] } };
    return { type: "file", file: { file_data: `data:${mime};base64,${d.data}` } };
  }
  if (p.fileData) {
    const f = p.fileData;
    if (typeof f.fileUri !== "string") throw badRequest(`${where}.fileData needs \`fileUri\`.`);
    const mime = typeof f.mimeType === "string" ? f.mimeType.toLowerCase() : "";
    if (/^https?:\/\//i.test(f.fileUri) && (mime.startsWith("image/") || mime === "")) return { type: "image_url", image_url: { url: f.fileUri } };
    return unsupported(LABEL, `A fileData part (${where}) that is not an image URL`, `files uploaded to Google are read there; ${HINT}`);
  }
  return unsupported(LABEL, `A ${partKind(p)} part (${where})`, "send text, inlineData, fileData and functionResponse parts");
}

/** The kind of a part, for an error message: its first field other than the part's metadata. */
function partKind(p: Json): string {
  return Object.keys(p).find((k) => k !== "thought" && k !== "thoughtSignature" && k !== "partMetadata") ?? "empty";
}

function positiveInt(v: unknown, name: string): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw badRequest(`\`generationConfig.${name}\` must be a positive integer.`);
  return v;
}

function generationFields(gc: unknown): Json {
  if (gc === undefined || gc === null) return {};
  if (typeof gc !== "object" || Array.isArray(gc)) throw badRequest("`generationConfig` must be an object.");
  const g = gc as Json;
  const out: Json = {};
  if (isSet(g.maxOutputTokens)) out.max_tokens = positiveInt(g.maxOutputTokens, "maxOutputTokens");
  if (isSet(g.temperature)) out.temperature = g.temperature;
  if (isSet(g.topP)) out.top_p = g.topP;
  if (isSet(g.candidateCount, 1)) out.n = positiveInt(g.candidateCount, "candidateCount");
  if (isSet(g.seed)) out.seed = g.seed;
  if (isSet(g.presencePenalty, 0)) out.presence_penalty = g.presencePenalty;
  if (isSet(g.frequencyPenalty, 0)) out.frequency_penalty = g.frequencyPenalty;
  if (isSet(g.stopSequences)) {
    if (!Array.isArray(g.stopSequences) || !g.stopSequences.every((s: unknown) => typeof s === "string")) throw badRequest("`generationConfig.stopSequences` must be an array of strings.");
    if (g.stopSequences.length) out.stop = g.stopSequences;
  }
  if (g.responseLogprobs === true || isSet(g.logprobs)) unsupported(LABEL, "`generationConfig.responseLogprobs`", HINT);
  if (Array.isArray(g.responseModalities) && g.responseModalities.some((m: unknown) => String(m).toUpperCase() !== "TEXT")) {
    unsupported(LABEL, "`generationConfig.responseModalities` other than TEXT", HINT);
  }
  if (isSet(g.speechConfig)) unsupported(LABEL, "`generationConfig.speechConfig`", HINT);
  const rf = responseFormatOf(g);
  if (rf) out.response_format = rf;
  return out;
}

function responseFormatOf(g: Json): Json | null {
  const mime = g.responseMimeType;
  const schema = g.responseJsonSchema ?? null;
  if (mime === undefined || mime === null || mime === "text/plain") {
    if (schema !== null || isSet(g.responseSchema)) throw badRequest("`generationConfig.responseSchema` needs `responseMimeType: \"application/json\"`.");
    return null;
  }
  if (mime !== "application/json") return unsupported(LABEL, `\`generationConfig.responseMimeType\` "${String(mime).slice(0, 40)}"`, "send application/json or text/plain");
  if (schema !== null) return { type: "json_schema", json_schema: { name: "response", schema } };
  if (isSet(g.responseSchema)) return { type: "json_schema", json_schema: { name: "response", schema: fromGeminiSchema(g.responseSchema) } };
  return { type: "json_object" };
}

function toolsOf(tools: unknown): Json[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw badRequest("`tools` must be an array of Tool objects.");
  const out: Json[] = [];
  tools.forEach((t: Json, i: number) => {
    if (!t || typeof t !== "object") throw badRequest(`tools[${i}] must be a Tool object.`);
    for (const kind of Object.keys(t)) {
      // Google Search, code execution, URL context, maps…: tools that run at Google.
      if (kind !== "functionDeclarations") unsupported(LABEL, `Google's hosted tool \`${kind}\` (tools[${i}])`, `send functionDeclarations only, or ${HINT}`);
    }
    const decls = t.functionDeclarations ?? [];
    if (!Array.isArray(decls)) throw badRequest(`tools[${i}].functionDeclarations must be an array.`);
    decls.forEach((d: Json, j: number) => {
      if (!d || typeof d !== "object" || typeof d.name !== "string" || !d.name) throw badRequest(`tools[${i}].functionDeclarations[${j}].name is required.`);
      const parameters = d.parametersJsonSchema ?? (d.parameters ? fromGeminiSchema(d.parameters) : { type: "object", properties: {} });
      const fn: Json = { name: d.name, parameters };
      if (typeof d.description === "string" && d.description) fn.description = d.description;
      out.push({ type: "function", function: fn });
    });
  });
  return out;
}

function toolChoiceOf(toolConfig: unknown, tools: Json[]): unknown {
  const fcc = (toolConfig as Json | null | undefined)?.functionCallingConfig;
  if (!fcc || typeof fcc !== "object") return undefined;
  const mode = typeof fcc.mode === "string" ? fcc.mode.toUpperCase() : "AUTO";
  const names: unknown[] = Array.isArray(fcc.allowedFunctionNames) ? fcc.allowedFunctionNames : [];
  switch (mode) {
    case "AUTO":
    case "MODE_UNSPECIFIED":
      return tools.length ? "auto" : undefined;
    case "NONE":
      return tools.length ? "none" : undefined;
    case "ANY":
      if (!tools.length) throw badRequest("`toolConfig.functionCallingConfig.mode` ANY needs `tools` with functionDeclarations.");
      if (names.length === 0) return "required";
      if (names.length === 1 && typeof names[0] === "string") {
        if (!tools.some((t) => t.function.name === names[0])) throw badRequest(`\`allowedFunctionNames\` names "${names[0]}", which is not among the functionDeclarations.`);
        return { type: "function", function: { name: names[0] } };
      }
      return unsupported(LABEL, "`toolConfig.functionCallingConfig.allowedFunctionNames` with several names", `allow one function or all, or ${HINT}`);
    default:
      return unsupported(LABEL, `\`toolConfig.functionCallingConfig.mode\` ${JSON.stringify(fcc.mode)}`, "send AUTO, ANY or NONE");
  }
}
