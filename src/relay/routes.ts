import type { Elysia } from "elysia";
import type { Ctx } from "../context.ts";
import { ANTHROPIC, BLITZ, GEMINI, INFERENCE, mount } from "../http/route.ts";
import { blitzBodyDoc, handleBlitz } from "../blitz/blitz.ts";
import { blitzJobRoutes } from "../blitz/jobs/routes.ts";
import { batchApiRoutes } from "../blitz/batches/routes.ts";
import { keyInfo } from "./key-info.ts";
import { listModels, retrieveModel } from "./models.ts";
import { handleCountTokens } from "./count-tokens.ts";
import { handleInference } from "./pipeline.ts";
import { chatCompletionsBodyDoc, countTokensBodyDoc, embeddingsBodyDoc, generateContentBodyDoc, messagesBodyDoc, responsesBodyDoc } from "../protocols/required-fields.ts";
import { getGeminiModel, handleModelAction, listGeminiModels } from "./gemini.ts";
import { transcriptionsHandler } from "./transcriptions.ts";
import { relayDeps } from "./relay-deps.ts";
import { RATE_LIMITED_DOC } from "./limits/headers.ts";

/** What an answer on a translated lane says about the fields it could not carry as sent (CONTRACT §9). */
const ADAPTED_DOC = "A translated lane names the request fields it mapped, dropped or moved (the routing key's `translation` policy) in `x-gateway-adapted: <field>=<mapped|dropped|moved>, …`.";

/** Tags (CONTRACT §9): the header every inference route reads. */
const TAGS_DOC = "Tags: `x-gateway-tags: t1,t2` (at most 10 distinct tags of 1–64 characters from `A-Za-z0-9_.:-`), or `metadata.tags` (an array of strings) in the body when no header is sent, are written on the request's usage records (`GET /v1/organizations/usage/records?tag=`, `/usage/groups?by=tag`); a malformed list is 400 `invalid_tags`, an untagged request on a key with `require_tags` 400 `tags_required`.";

/**
 * The inference endpoints: the hot path. The edge that holds the instance: its handlers get the
 * request path's narrow view of it (relay-deps.ts), built here once.
 */
export function relayRoutes(ctx: Ctx, app: Elysia): void {
  const deps = relayDeps(ctx);
  const created = Math.floor(Date.now() / 1000);
  mount(ctx, app, "/v1/chat/completions", { POST: (rc) => handleInference(deps, rc, "chat") }, INFERENCE, {
    POST: {
      summary: "Chat completion (OpenAI-compatible)", tag: "Inference", auth: "routing-key", body: chatCompletionsBodyDoc,
      description: `Runs the request through the routing key's lanes in order, falling over to the next lane when one fails. ${TAGS_DOC}`,
      responses: {
        "200": { description: `The completion (JSON), or with \`stream: true\` server-sent events. ${ADAPTED_DOC}` },
        "402": { description: "budget_exceeded: the key's monthly budget does not fit this request." },
        ...RATE_LIMITED_DOC,
      },
    },
  });
  mount(ctx, app, "/v1/responses", { POST: (rc) => handleInference(deps, rc, "responses") }, INFERENCE, {
    POST: {
      summary: "Response (OpenAI Responses API)", tag: "Inference", auth: "routing-key", body: responsesBodyDoc, description: TAGS_DOC,
      responses: { "200": { description: `The response (JSON), or with \`stream: true\` server-sent events. ${ADAPTED_DOC}` }, ...RATE_LIMITED_DOC },
    },
  });
  mount(ctx, app, "/v1/messages", { POST: (rc) => handleInference(deps, rc, "anthropic") }, ANTHROPIC, {
    POST: {
      summary: "Message (Anthropic Messages API)", tag: "Inference", auth: "routing-key", body: messagesBodyDoc,
      description: "For Anthropic SDKs: the routing key goes in `x-api-key` or `Authorization`. Passed through on Anthropic lanes, translated elsewhere. " + TAGS_DOC,
      responses: { "200": { description: `The message (JSON), or with \`stream: true\` Anthropic server-sent events. ${ADAPTED_DOC}` }, ...RATE_LIMITED_DOC },
    },
  });
  mount(ctx, app, "/v1/embeddings", { POST: (rc) => handleInference(deps, rc, "embeddings") }, INFERENCE, {
    POST: {
      summary: "Embeddings (OpenAI-compatible)", tag: "Inference", auth: "routing-key", body: embeddingsBodyDoc,
      description: "Passed through on OpenAI-protocol lanes that embed, translated to batchEmbedContents on Gemini lanes; other lanes fail over. " + TAGS_DOC,
      responses: { "200": { description: "An OpenAI embedding list (float or base64 vectors) with usage." }, ...RATE_LIMITED_DOC },
    },
  });
  mount(ctx, app, "/v1/messages/count_tokens", { POST: (rc) => handleCountTokens(deps, rc) }, ANTHROPIC, {
    POST: {
      summary: "Count a Messages request's input tokens", tag: "Inference", auth: "routing-key", body: countTokensBodyDoc,
      description: "Exact on Anthropic lanes; elsewhere an estimate, marked by the `x-token-count: estimated` header.",
      responses: { "200": { description: "`{input_tokens}`" } },
    },
  });
  mount(ctx, app, "/v1/models", { GET: (rc) => listModels(deps, rc.request, created) }, INFERENCE, {
    GET: { summary: "Models the key's lanes can serve", tag: "Inference", auth: "routing-key", responses: { "200": { description: "An OpenAI model list." } } },
  });
  mount(ctx, app, "/v1/models/:model", { GET: (rc) => retrieveModel(deps, rc.request, created) }, INFERENCE, {
    GET: { summary: "One model of the list (the official SDK's models.retrieve)", tag: "Inference", auth: "routing-key", responses: { "200": { description: "An OpenAI model object." }, "404": { description: "model_not_found in the OpenAI shape." } } },
  });
  mount(ctx, app, "/v1/key", { GET: (rc) => keyInfo(deps, rc.request) }, INFERENCE, {
    GET: { summary: "The calling routing key: lanes, mode, budget", tag: "Inference", auth: "routing-key", responses: { "200": { description: "The key and this month's spend." } } },
  });
  mount(ctx, app, "/blitz", { POST: (rc) => handleBlitz(deps, rc) }, BLITZ, {
    POST: {
      summary: "Up to 50 prompts in one request", tag: "Inference", auth: "routing-key", body: blitzBodyDoc,
      description: "Each prompt runs as its own chat completion through the key's lanes, all at once; one failing prompt is one error entry. The batch's tags (the header, or the shared `metadata.tags`) go on every prompt's records. " + TAGS_DOC,
      responses: { "200": { description: "`blitz.result`: one entry per prompt, in order, and the summed usage. Streamed: `text/event-stream` with `event: item` (`{index, status, completion | error, usage}`) per prompt in finishing order, `:` keep-alive comments while none finished, and a final `event: done` (`blitz.summary`: prompts, succeeded, failed, cancelled, usage)." }, ...RATE_LIMITED_DOC },
    },
  });
  // Gemini-native (CONTRACT §9): `{model}` is `gemini-2.5-flash:generateContent` on POST, the model alone on GET.
  mount(ctx, app, "/v1beta/models", { GET: (rc) => listGeminiModels(deps, rc) }, GEMINI, {
    GET: { summary: "Models the key's lanes can serve (Gemini API shape)", tag: "Inference", auth: "routing-key", responses: { "200": { description: "`{models: [{name: \"models/…\", displayName, supportedGenerationMethods, inputTokenLimit, outputTokenLimit}]}`." } } },
  });
  mount(ctx, app, "/v1beta/models/:model", { GET: (rc) => getGeminiModel(deps, rc), POST: (rc) => handleModelAction(deps, rc) }, GEMINI, {
    GET: { summary: "One model of the Gemini model list", tag: "Inference", auth: "routing-key", responses: { "200": { description: "A Gemini Model object." }, "404": { description: "NOT_FOUND in Google's error shape." } } },
    POST: {
      summary: "Gemini API: generateContent, streamGenerateContent, countTokens", tag: "Inference", auth: "routing-key", body: generateContentBodyDoc,
      description: "For Gemini CLI and Google's SDKs: `{model}` is `<model>:generateContent`, `<model>:streamGenerateContent` (add `?alt=sse` for server-sent events, else one JSON array) or `<model>:countTokens` (a `{contents}` or `{generateContentRequest}` body; exact on google lanes, else estimated and marked `x-token-count: estimated`). The routing key goes in `x-goog-api-key`, `?key=` or `Authorization: Bearer`. Passed through on google lanes, translated elsewhere. generateContent and streamGenerateContent read tags (countTokens writes no usage record). " + TAGS_DOC,
      responses: {
        "200": { description: "A GenerateContentResponse; streamed: one per event, the last carrying finishReason and usageMetadata. countTokens: `{totalTokens}`." },
        "402": { description: "budget_exceeded (status RESOURCE_EXHAUSTED, HTTP 402): the key's monthly budget does not fit this request." },
        ...RATE_LIMITED_DOC,
      },
    },
  });
  blitzJobRoutes(ctx, app);
  batchApiRoutes(ctx, app);
  // Other methods: 405 without code.
  mount(ctx, app, "/v1/audio/transcriptions", { POST: transcriptionsHandler(deps) }, INFERENCE, {
    POST: {
      summary: "Transcribe audio (through the subscription lane)", tag: "Inference", auth: "routing-key",
      rawBody: { contentType: "multipart/form-data", schema: { type: "object", required: ["file"], properties: { file: { type: "string", contentMediaType: "application/octet-stream" }, model: { type: "string" } } } },
      responses: { "200": { description: "The transcription, as the upstream answered it." }, ...RATE_LIMITED_DOC },
    },
  });
}
