// The Gemini-native inbound API (CONTRACT §9), for Gemini CLI and Google's SDKs with a routing key
// as their API key (in `x-goog-api-key`, `?key=` or `Authorization: Bearer`):
//   POST /v1beta/models/{model}:generateContent        one answer
//   POST /v1beta/models/{model}:streamGenerateContent  SSE with `alt=sse`, else one JSON array
//   POST /v1beta/models/{model}:countTokens            {totalTokens}
//   GET  /v1beta/models, GET /v1beta/models/{model}    the key's models, in Google's shape
// Inference goes through the same pipeline as every other protocol (admission, lanes, fallback,
// accounting): passed through on google lanes, translated through the chat pivot elsewhere.
import type { RelayDeps } from "./relay-deps.ts";
import { GatewayError } from "../errors.ts";
import type { RequestContext } from "../http/route.ts";
import { NOT_OBJECT, parseJsonText, readText } from "../http/body.ts";
import { sseToJsonArray } from "../protocols/gemini/index.ts";
import { invalidRequest } from "../protocols/required-fields.ts";
import type { Json } from "../protocols/types.ts";
import type { LaneResult, RelayRequest } from "./attempt.ts";
import { resolveRoutingKey } from "./auth.ts";
import { MoneyCall } from "../money/money.ts";
import { catalogContextWindow, catalogMaxOutput, DEFAULT_MAX_OUTPUT_TOKENS } from "../money/output-limits.ts";
import { LaneRunner } from "./lane-runner.ts";
import { keyModels } from "./models.ts";
import { handleInference } from "./pipeline.ts";
import { noProviders } from "./relay-errors.ts";

const PREFIX = "/v1beta/models/";
const METHODS = ["generateContent", "streamGenerateContent", "countTokens"] as const;
type Method = (typeof METHODS)[number];

const notFound = (message: string) => new GatewayError(404, message, { code: "not_found" });

/** `gemini-2.5-flash`, `models/gemini-2.5-flash` or their URL-encoded forms → the model id. */
export function modelIdOf(segment: string): string {
  let id: string;
  try {
    id = decodeURIComponent(segment);
  } catch {
    id = segment;
  }
  return id.replace(/^models\//, "");
}

/** The path's `{model}:{method}`, or a 404 naming what the gateway serves. */
export function parseModelAction(pathname: string): { model: string; method: Method } {
  const segment = pathname.slice(PREFIX.length);
  const colon = segment.lastIndexOf(":");
  const method = colon > 0 ? segment.slice(colon + 1) : "";
  const model = colon > 0 ? modelIdOf(segment.slice(0, colon)) : "";
  if (!(METHODS as readonly string[]).includes(method) || !model) {
    throw notFound(`No method ${JSON.stringify(method || segment.slice(0, 100))} on models here. POST /v1beta/models/{model}:generateContent, :streamGenerateContent or :countTokens.`);
  }
  return { model, method: method as Method };
}

/** POST /v1beta/models/{model}:{method}. */
export async function handleModelAction(ctx: RelayDeps, rc: RequestContext): Promise<Response> {
  const url = new URL(rc.request.url);
  const { model, method } = parseModelAction(url.pathname);
  if (method === "countTokens") return handleGeminiCount(ctx, rc, model);
  if (method === "generateContent") return handleInference(ctx, rc, "gemini", { model, stream: false });
  const res = await handleInference(ctx, rc, "gemini", { model, stream: true });
  // Without alt=sse Google streams one JSON array, its elements the stream's events.
  if (url.searchParams.get("alt") === "sse" || !res.body || !res.headers.get("content-type")?.startsWith("text/event-stream")) return res;
  const headers = new Headers(res.headers);
  headers.set("content-type", "application/json; charset=utf-8");
  return new Response(res.body.pipeThrough(sseToJsonArray()), { status: res.status, headers });
}

/** The documented estimate where a lane cannot count: a quarter token per byte of what the model reads. */
export function estimateGeminiTokens(body: Json): number {
  const src = body.generateContentRequest && typeof body.generateContentRequest === "object" ? body.generateContentRequest : body;
  const read = JSON.stringify([src.systemInstruction ?? null, src.contents ?? [], src.tools ?? null]);
  return Math.max(1, Math.ceil(Buffer.byteLength(read, "utf8") / 4));
}

const countAnswer = (body: string, kind: "exact" | "estimated") =>
  new Response(body, { status: 200, headers: { "content-type": "application/json", "x-token-count": kind } });

/**
 * POST /v1beta/models/{model}:countTokens: exact on google lanes (Google's own count, answered as
 * Google sent it), elsewhere the estimate, marked `x-token-count: estimated`, as the Messages
 * count_tokens route does (count-tokens.ts). Free: no budget reserved, no usage record.
 */
async function handleGeminiCount(ctx: RelayDeps, rc: RequestContext, model: string): Promise<Response> {
  rc.access.endpoint = "count_tokens";
  const key = await resolveRoutingKey(ctx, rc.request, "google");
  rc.access.keyPrefix = key.keyPrefix;
  const raw = await readText(rc.request, ctx.config.MAX_REQUEST_BYTES);
  const parsed = parseJsonText(raw.text, invalidRequest);
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw invalidRequest(NOT_OBJECT);
  const body = parsed as Json;
  const gcr = body.generateContentRequest;
  if (!Array.isArray(body.contents) && !(gcr && typeof gcr === "object" && Array.isArray(gcr.contents))) {
    throw invalidRequest("contents: required (an array of Content objects), or a generateContentRequest with them.", "contents");
  }
  body.model = model;
  if (key.lanes.length === 0) throw noProviders();
  const opts = { requestId: rc.requestId, endpoint: "count_tokens" };
  // A request against the key's rate limits (no tokens): a key answering 429 makes no upstream call.
  const money = key.limits ? await MoneyCall.reserveFor(ctx, key, opts, null, { requests: 1, tokens: 0 }) : MoneyCall.free(ctx, key, opts);
  const rr: RelayRequest = {
    ctx, key, endpoint: "count_tokens", shape: "gemini", body, bytes: 0, stream: false, model,
    requestId: rc.requestId, signal: rc.request.signal, money, access: rc.access, count: true,
  };
  let r: LaneResult;
  try {
    r = await new LaneRunner(rr, key.lanes).next();
  } finally {
    money.settle();
  }
  switch (r.kind) {
    case "body":
      return countAnswer(r.text, "exact");
    case "uncounted":
      return countAnswer(JSON.stringify({ totalTokens: estimateGeminiTokens(body) }), "estimated");
    case "aborted":
      return new Response(null, { status: 499 });
    case "client":
      throw r.error;
    default:
      throw new GatewayError(502, "The token count got an answer the gateway cannot relay; retry the request.", { code: "upstream_error" });
  }
}

const GENERATION_METHODS = ["generateContent", "streamGenerateContent", "countTokens"];

/** One model in Google's shape; limits from the models.dev catalog where it lists the model. */
export function geminiModelOf(id: string): Json {
  return {
    name: `models/${id}`,
    baseModelId: id,
    version: "001",
    displayName: id,
    description: `${id}, through the gateway's routing key lanes.`,
    inputTokenLimit: catalogContextWindow(id) ?? 0,
    outputTokenLimit: catalogMaxOutput(id) ?? DEFAULT_MAX_OUTPUT_TOKENS,
    supportedGenerationMethods: GENERATION_METHODS,
  };
}

async function keyModelIds(ctx: RelayDeps, request: Request): Promise<string[]> {
  const key = await resolveRoutingKey(ctx, request, "google");
  return [...new Set((await keyModels(ctx, key, request.signal)).map(([id]) => id))];
}

/** GET /v1beta/models: what the key's lanes can be called with (the same list as GET /v1/models with the key). */
export async function listGeminiModels(ctx: RelayDeps, rc: RequestContext): Promise<object> {
  return { models: (await keyModelIds(ctx, rc.request)).map(geminiModelOf) };
}

/** GET /v1beta/models/{model}: one model of that list, or 404 NOT_FOUND. */
export async function getGeminiModel(ctx: RelayDeps, rc: RequestContext): Promise<object> {
  const id = modelIdOf(new URL(rc.request.url).pathname.slice(PREFIX.length));
  const ids = await keyModelIds(ctx, rc.request);
  if (!ids.includes(id)) throw notFound(`models/${id.slice(0, 200)} is not found among this routing key's models; GET /v1beta/models lists them.`);
  return geminiModelOf(id);
}
