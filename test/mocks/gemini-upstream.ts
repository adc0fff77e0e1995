// A mock Gemini API: a real Bun HTTP server on loopback that tests point the gateway at
// (PROVIDER_GOOGLE_BASE_URL = mock.url, which ends in /v1beta like the real base).
//   POST /v1beta/models/{model}:generateContent
//   POST /v1beta/models/{model}:streamGenerateContent?alt=sse
//   POST /v1beta/models/{model}:batchEmbedContents (vectors only, no token counts, as Google answers)
//   POST /v1beta/models/{model}:countTokens ({contents} or {generateContentRequest} → {totalTokens})
//   batch mode (models/{model}:batchGenerateContent, batches/{id}, :cancel): gemini-batch.ts
//
// It checks what the gateway sends as strictly as Google does and answers Google's error shape
// ({"error":{"code","message","status"}}) otherwise: the x-goog-api-key header (missing → 403,
// wrong → 400 API_KEY_INVALID), no unknown fields anywhere it checks (top level, parts,
// generationConfig, function declarations and the OpenAPI-subset schemas), contents present with
// roles user/model and non-empty parts of one kind each, a function-call turn only right after a
// user turn or a function-response turn, function responses matching the calls of the turn
// before in number and names, tool config naming declared functions, at most 5 stop sequences.
// Valid requests get the next queued reply (fixtures under test/fixtures/gemini/, framed as
// Gemini frames them: `data: <json>\r\n\r\n`), or a generated answer.
import { frameEvents } from "../fixtures/index.ts";
import { headersOf, isObject, lastUserText, resolveEvents, resolveJson, sseBody, type Received, type VendorReply } from "../fixtures/replay.ts";
import { serveLoopback } from "./scaffold.ts";
import { geminiBatchMock, type GeminiBatchMock } from "./gemini-batch.ts";

export interface MockGemini {
  /** Base URL including /v1beta (what PROVIDER_GOOGLE_BASE_URL takes). */
  url: string;
  apiKey: string;
  /** Batch mode (POST models/{model}:batchGenerateContent, GET batches/{id}, :cancel). */
  batch: GeminiBatchMock;
  received: Received[];
  readonly served: Received[];
  enqueue(...replies: VendorReply[]): void;
  stop(): Promise<void>;
}

const TOP_LEVEL = new Set(["contents", "systemInstruction", "generationConfig", "tools", "toolConfig", "safetySettings", "cachedContent", "labels"]);
const GEN_CONFIG = new Set(["temperature", "topP", "topK", "candidateCount", "maxOutputTokens", "stopSequences", "presencePenalty", "frequencyPenalty", "seed", "responseMimeType", "responseSchema", "responseJsonSchema", "thinkingConfig", "responseLogprobs", "logprobs", "responseModalities", "mediaResolution", "speechConfig"]);
const PART_DATA = ["text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode", "codeExecutionResult"];
const PART_META = new Set(["thought", "thoughtSignature", "videoMetadata"]);
const SCHEMA_KEYS = new Set(["type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems", "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum"]);
const SCHEMA_TYPES = new Set(["string", "number", "integer", "boolean", "array", "object", "null"]);

class Invalid extends Error {
  constructor(message: string, readonly code = 400, readonly status = "INVALID_ARGUMENT", readonly details?: unknown[]) {
    super(message);
  }
}

function check(cond: unknown, message: string): asserts cond {
  if (!cond) throw new Invalid(message);
}

const unknownName = (name: string, at: string) => `Invalid JSON payload received. Unknown name "${name}" at '${at}': Cannot find field.`;

function validateSchema(s: any, at: string): void {
  check(isObject(s), `${at}: schema must be an object`);
  for (const k of Object.keys(s)) check(SCHEMA_KEYS.has(k), unknownName(k, at));
  if (s.type !== undefined) check(typeof s.type === "string" && SCHEMA_TYPES.has(s.type.toLowerCase()), `Invalid value at '${at}.type' (type.googleapis.com/google.ai.generativelanguage.v1beta.Type), "${s.type}"`);
  if (typeof s.type === "string" && s.type.toLowerCase() === "object" && s.properties !== undefined) {
    check(isObject(s.properties) && Object.keys(s.properties).length > 0, `* ${at}.properties: should be non-empty for OBJECT type`);
  }
  if (s.enum !== undefined) check(Array.isArray(s.enum) && s.enum.every((v: unknown) => typeof v === "string"), `Invalid value at '${at}.enum': only strings are allowed`);
  for (const [name, sub] of Object.entries(s.properties ?? {})) validateSchema(sub, `${at}.properties[${name}].value`);
  if (s.items !== undefined) validateSchema(s.items, `${at}.items`);
  if (s.anyOf !== undefined) (s.anyOf as unknown[]).forEach((b, i) => validateSchema(b, `${at}.any_of[${i}]`));
  if (Array.isArray(s.required)) for (const r of s.required) check(s.properties && r in s.properties, `* ${at}.required[${r}]: property is not defined`);
}

function validatePart(p: any, at: string): void {
  check(isObject(p), `${at}: part must be an object`);
  for (const k of Object.keys(p)) check(PART_DATA.includes(k) || PART_META.has(k), unknownName(k, at));
  const kinds = PART_DATA.filter((k) => p[k] !== undefined);
  check(kinds.length === 1, `* ${at}.data: required oneof field 'data' must have one initialized field`);
  if (p.text !== undefined) check(typeof p.text === "string", `Invalid value at '${at}.text' (TYPE_STRING)`);
  if (p.inlineData) check(typeof p.inlineData.mimeType === "string" && typeof p.inlineData.data === "string", `* ${at}.inline_data: mime_type and data are required`);
  if (p.fileData) check(typeof p.fileData.fileUri === "string", `* ${at}.file_data.file_uri: a file uri is required`);
  if (p.functionCall) check(typeof p.functionCall.name === "string" && (p.functionCall.args === undefined || isObject(p.functionCall.args)), `* ${at}.function_call: name is required and args must be an object`);
  if (p.functionResponse) check(typeof p.functionResponse.name === "string" && isObject(p.functionResponse.response), `* ${at}.function_response: name is required and response must be an object`);
}

function validateKey(req: Request, url: URL, apiKey: string): void {
  const key = req.headers.get("x-goog-api-key");
  if (!key) throw new Invalid("Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.", 403, "PERMISSION_DENIED");
  if (key !== apiKey) {
    throw new Invalid("API key not valid. Please pass a valid API key.", 400, "INVALID_ARGUMENT", [
      { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "API_KEY_INVALID", domain: "googleapis.com", metadata: { service: "generativelanguage.googleapis.com" } },
    ]);
  }
  if (url.searchParams.has("key")) throw new Invalid("The API key must travel in the x-goog-api-key header, not the URL (keys in URLs reach access logs).");
}

/** batchEmbedContents: {requests: [{model: "models/<the path's model>", content: {parts: [{text}]}, taskType?, title?, outputDimensionality?}]}. */
function validateEmbedRequest(req: Request, url: URL, body: any, apiKey: string, model: string): void {
  validateKey(req, url, apiKey);
  check(isObject(body), "Invalid JSON payload received. Expected an object.");
  for (const k of Object.keys(body)) check(k === "requests", unknownName(k, ""));
  check(Array.isArray(body.requests) && body.requests.length > 0, "* BatchEmbedContentsRequest.requests: requests is not specified");
  check(body.requests.length <= 100, "* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch");
  body.requests.forEach((r: any, i: number) => {
    const at = `requests[${i}]`;
    check(isObject(r), `${at} must be an object`);
    for (const k of Object.keys(r)) check(["model", "content", "taskType", "title", "outputDimensionality"].includes(k), unknownName(k, at));
    check(r.model === `models/${model}`, `* BatchEmbedContentsRequest.${at}.model: Model names in the batch must match the model in the URL (models/${model}).`);
    check(isObject(r.content) && Array.isArray(r.content.parts) && r.content.parts.length > 0, `* BatchEmbedContentsRequest.${at}.content.parts: content is not specified`);
    r.content.parts.forEach((p: any, j: number) => {
      validatePart(p, `${at}.content.parts[${j}]`);
      check(typeof p.text === "string", `* BatchEmbedContentsRequest.${at}.content.parts[${j}]: only text can be embedded`);
    });
    if (r.outputDimensionality !== undefined) check(Number.isInteger(r.outputDimensionality) && r.outputDimensionality > 0, `* BatchEmbedContentsRequest.${at}.output_dimensionality: must be positive`);
  });
}

/** A deterministic vector for a text (the mock's "embedding"). */
export function mockVector(text: string, dims: number): number[] {
  return Array.from({ length: dims }, (_, i) => Math.round(Math.sin(text.length * (i + 1) + (text.charCodeAt(i % Math.max(1, text.length)) || 0)) * 1e4) / 1e4);
}

function validateRequest(req: Request, url: URL, body: any, apiKey: string): void {
  validateKey(req, url, apiKey);
  check(isObject(body), "Invalid JSON payload received. Expected an object.");
  for (const k of Object.keys(body)) check(TOP_LEVEL.has(k), unknownName(k, ""));
  check(Array.isArray(body.contents) && body.contents.length > 0, "* GenerateContentRequest.contents: contents is not specified");

  if (body.systemInstruction !== undefined) {
    const si = body.systemInstruction;
    check(isObject(si) && Array.isArray(si.parts) && si.parts.length > 0, "* GenerateContentRequest.system_instruction.parts: contents.parts must not be empty.");
    for (const k of Object.keys(si)) check(k === "parts" || k === "role", unknownName(k, "system_instruction"));
    si.parts.forEach((p: any, i: number) => {
      validatePart(p, `system_instruction.parts[${i}]`);
      check(typeof p.text === "string", "* GenerateContentRequest.system_instruction: only text parts are supported");
    });
  }

  const gc = body.generationConfig;
  if (gc !== undefined) {
    check(isObject(gc), "generation_config must be an object");
    for (const k of Object.keys(gc)) check(GEN_CONFIG.has(k), unknownName(k, "generation_config"));
    if (gc.temperature !== undefined) check(typeof gc.temperature === "number" && gc.temperature >= 0 && gc.temperature <= 2, "* GenerateContentRequest.generation_config.temperature: must be in the range [0.0, 2.0]");
    if (gc.stopSequences !== undefined) check(Array.isArray(gc.stopSequences) && gc.stopSequences.length <= 5, "* GenerateContentRequest.generation_config.stop_sequences: at most 5 stop sequences are allowed");
    if (gc.responseSchema !== undefined) {
      check(gc.responseMimeType === "application/json" || gc.responseMimeType === "text/x.enum", "* GenerateContentRequest.generation_config.response_mime_type: allowed mimetypes are `application/json` and `text/x.enum` when response_schema is set");
      validateSchema(gc.responseSchema, "generation_config.response_schema");
    }
    if (gc.maxOutputTokens !== undefined) check(Number.isInteger(gc.maxOutputTokens) && gc.maxOutputTokens > 0, "* GenerateContentRequest.generation_config.max_output_tokens: must be positive");
  }

  const declared = new Set<string>();
  if (body.tools !== undefined) {
    check(Array.isArray(body.tools), "tools must be a list");
    body.tools.forEach((t: any, i: number) => {
      check(isObject(t), `tools[${i}] must be an object`);
      for (const k of Object.keys(t)) check(["functionDeclarations", "googleSearch", "codeExecution", "urlContext"].includes(k), unknownName(k, `tools[${i}]`));
      (t.functionDeclarations ?? []).forEach((fd: any, j: number) => {
        const at = `tools[${i}].function_declarations[${j}]`;
        for (const k of Object.keys(fd)) check(["name", "description", "parameters", "parametersJsonSchema", "response", "behavior"].includes(k), unknownName(k, at));
        check(typeof fd.name === "string" && /^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$/.test(fd.name), `* GenerateContentRequest.${at}.name: Invalid function name.`);
        declared.add(fd.name);
        if (fd.parameters !== undefined) validateSchema(fd.parameters, `${at}.parameters`);
      });
    });
  }
  if (body.toolConfig !== undefined) {
    const fcc = body.toolConfig?.functionCallingConfig;
    check(isObject(fcc) && ["AUTO", "ANY", "NONE", "VALIDATED"].includes(fcc.mode), "Invalid value at 'tool_config.function_calling_config.mode'");
    if (fcc.allowedFunctionNames !== undefined) {
      check(fcc.mode === "ANY" || fcc.mode === "VALIDATED", "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: only set allowed_function_names when mode is ANY");
      for (const n of fcc.allowedFunctionNames) check(declared.has(n), `* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: ${n} is not declared`);
    }
  }

  let previous: { role: string; calls: string[]; responses: number } | null = null;
  body.contents.forEach((c: any, i: number) => {
    const at = `contents[${i}]`;
    check(isObject(c), `${at} must be an object`);
    for (const k of Object.keys(c)) check(k === "role" || k === "parts", unknownName(k, at));
    check(c.role === "user" || c.role === "model", `* GenerateContentRequest.${at}.role: Please use a valid role: user, model.`);
    check(Array.isArray(c.parts) && c.parts.length > 0, `* GenerateContentRequest.${at}.parts: contents.parts must not be empty.`);
    c.parts.forEach((p: any, j: number) => validatePart(p, `${at}.parts[${j}]`));
    const calls = c.parts.filter((p: any) => p.functionCall).map((p: any) => p.functionCall.name as string);
    const responses = c.parts.filter((p: any) => p.functionResponse).map((p: any) => p.functionResponse.name as string);
    if (calls.length) {
      check(c.role === "model", `* GenerateContentRequest.${at}: function calls must come from the model role`);
      check(previous !== null && previous.role === "user", "Please ensure that function call turn comes immediately after a user turn or after a function response turn.");
      for (const n of calls) if (declared.size) check(declared.has(n), `* GenerateContentRequest.${at}: function ${n} is not declared in tools`);
    }
    if (responses.length) {
      check(c.role === "user", `* GenerateContentRequest.${at}: function responses must have the user role`);
      check(previous !== null && previous.calls.length === responses.length, "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.");
      check([...responses].sort().join() === [...previous.calls].sort().join(), `* GenerateContentRequest.${at}: function response names must match the function calls of the turn before`);
    }
    if (previous?.calls.length && !responses.length) throw new Invalid("Please ensure that function response turn comes immediately after a function call turn.");
    previous = { role: c.role, calls, responses: responses.length };
  });
}

function textOfTurn(c: any): string {
  return (c.parts as any[]).filter((p) => typeof p.text === "string").map((p) => p.text).join("");
}

export async function startMockGemini(opts: { apiKey?: string } = {}): Promise<MockGemini> {
  const apiKey = opts.apiKey ?? `AIza${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
  const received: Received[] = [];
  const queue: VendorReply[] = [];
  let seq = 0;

  const errorResponse = (code: number, status: string, message: string, details?: unknown[]) =>
    new Response(JSON.stringify({ error: { code, message, status, ...(details ? { details } : {}) } }), { status: code, headers: { "content-type": "application/json; charset=UTF-8" } });

  function generated(body: any, model: string): { json: Record<string, unknown>; events: string[] } {
    const text = `gemini answer to: ${lastUserText(body.contents, textOfTurn)}`;
    const prompt = Math.max(1, Math.ceil(JSON.stringify(body.contents).length / 4));
    const out = text.split(" ").length;
    const usageMetadata = { promptTokenCount: prompt, candidatesTokenCount: out, totalTokenCount: prompt + out, promptTokensDetails: [{ modality: "TEXT", tokenCount: prompt }] };
    const responseId = `mockResp${++seq}`;
    const json = { candidates: [{ content: { parts: [{ text }], role: "model" }, finishReason: "STOP", index: 0 }], usageMetadata, modelVersion: model, responseId };
    const words = text.split(/(?<= )/);
    const events = words.map((w, i) => JSON.stringify({
      candidates: [{ content: { parts: [{ text: w }], role: "model" }, index: 0, ...(i === words.length - 1 ? { finishReason: "STOP" } : {}) }],
      usageMetadata: i === words.length - 1 ? usageMetadata : { promptTokenCount: prompt, totalTokenCount: prompt },
      modelVersion: model,
      responseId,
    }));
    return { json, events };
  }

  // Batch mode: each inline request checked and answered as generateContent does.
  const batch = geminiBatchMock({
    validate: (req, url, request) => {
      try {
        validateRequest(req, url, request, apiKey);
      } catch (e) {
        if (e instanceof Invalid) throw new Error(e.message);
        throw e;
      }
    },
    answer: (request, model) => generated(request, model).json,
    checkKey: (req) => req.headers.get("x-goog-api-key") === apiKey,
  });

  const server = serveLoopback({
    idleTimeout: 60,
    async fetch(req) {
      const url = new URL(req.url);
      const batched = await batch.handle(req, url);
      if (batched) return batched;
      const rec: Received = { method: req.method, path: url.pathname, query: Object.fromEntries(url.searchParams), headers: headersOf(req), body: null, rejected: null };
      received.push(rec);
      const m = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent|batchEmbedContents|countTokens)$/.exec(url.pathname);
      if (req.method !== "POST" || !m) {
        rec.rejected = "not_found";
        return errorResponse(404, "NOT_FOUND", `The requested URL ${url.pathname} was not found on this server.`);
      }
      const model = decodeURIComponent(m[1]!);
      const stream = m[2] === "streamGenerateContent";
      try {
        rec.body = JSON.parse(await req.text());
      } catch {
        rec.rejected = "invalid json";
        return errorResponse(400, "INVALID_ARGUMENT", "Invalid JSON payload received.");
      }
      if (m[2] === "countTokens") {
        try {
          validateKey(req, url, apiKey);
          const b = rec.body;
          check(isObject(b), "Invalid JSON payload received. Expected an object.");
          for (const k of Object.keys(b)) check(k === "contents" || k === "generateContentRequest", unknownName(k, ""));
          check(!(b.contents && b.generateContentRequest), "* CountTokensRequest: send contents or generate_content_request, not both");
          if (b.generateContentRequest) {
            check(b.generateContentRequest.model === `models/${model}`, "* CountTokensRequest.generate_content_request.model: must name the model of the URL");
            const { model: _m, ...inner } = b.generateContentRequest;
            validateRequest(req, url, inner, apiKey);
          } else {
            validateRequest(req, url, { contents: b.contents }, apiKey);
          }
        } catch (e) {
          if (!(e instanceof Invalid)) throw e;
          rec.rejected = e.message;
          return errorResponse(e.code, e.status, e.message, e.details);
        }
        const counted = rec.body.generateContentRequest ?? rec.body;
        const totalTokens = Math.max(1, Math.ceil(JSON.stringify([counted.systemInstruction ?? null, counted.contents, counted.tools ?? null]).length / 4));
        return Response.json({ totalTokens, promptTokensDetails: [{ modality: "TEXT", tokenCount: totalTokens }] });
      }
      if (m[2] === "batchEmbedContents") {
        try {
          validateEmbedRequest(req, url, rec.body, apiKey, model);
        } catch (e) {
          if (!(e instanceof Invalid)) throw e;
          rec.rejected = e.message;
          return errorResponse(e.code, e.status, e.message, e.details);
        }
        // Google's answer carries the vectors only: no token counts.
        return Response.json({ embeddings: rec.body.requests.map((r: any) => ({ values: mockVector(r.content.parts.map((p: any) => p.text).join(""), r.outputDimensionality ?? 8) })) });
      }
      try {
        if (stream) check(url.searchParams.get("alt") === "sse", "This mock serves streamGenerateContent with alt=sse only.");
        validateRequest(req, url, rec.body, apiKey);
      } catch (e) {
        if (!(e instanceof Invalid)) throw e;
        rec.rejected = e.message;
        return errorResponse(e.code, e.status, e.message, e.details);
      }
      const reply = queue.shift() ?? {};
      if (reply.status && (reply.status < 200 || reply.status > 299)) {
        const body = reply.error ? resolveJson("gemini", reply.error) : { error: { code: reply.status, message: "Internal error encountered.", status: "INTERNAL" } };
        return new Response(JSON.stringify(body), { status: reply.status, headers: { "content-type": "application/json; charset=UTF-8" } });
      }
      const gen = generated(rec.body, model);
      if (!stream) return new Response(JSON.stringify(reply.json ? resolveJson("gemini", reply.json) : gen.json), { headers: { "content-type": "application/json; charset=UTF-8" } });
      const lines = reply.stream ? resolveEvents("gemini", reply.stream) : gen.events;
      return new Response(sseBody(frameEvents("gemini", lines), reply), { headers: { "content-type": "text/event-stream" } });
    },
  });

  return {
    url: `${server.origin}/v1beta`,
    apiKey,
    batch,
    received,
    get served() { return received.filter((r) => r.rejected === null); },
    enqueue(...replies) { queue.push(...replies); },
    stop: server.stop,
  };
}
