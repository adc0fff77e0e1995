// The vendor batch APIs batch work can go to (CONTRACT §9 "Batch work": OpenAI's Batch API,
// Anthropic's Message Batches, Gemini batch mode), one entry per provider: how an item's chat body is written for the vendor, how the batch is submitted, polled,
// cancelled and read back, and the vendor's batch discount. The poller (poller.ts) names none of
// them; a provider without an entry runs batch work live.
import type { Ctx } from "../../context.ts";
import { AdaptLog } from "../../protocols/adapt.ts";
import { anthropicCodec } from "../../protocols/anthropic/index.ts";
import { geminiCodec } from "../../protocols/gemini/index.ts";
import type { ChatRequest, Json, Usage } from "../../protocols/types.ts";
import { ANTHROPIC_BATCH } from "../../providers/anthropic/batch.ts";
import { catalogHints } from "../../providers/catalog-hints.ts";
import { GOOGLE_BATCH } from "../../providers/google/batch.ts";
import { OPENAI_BATCH } from "../../providers/openai/batch.ts";
import type { ResolvedLane } from "../../providers/types.ts";
import type { KeyContext } from "../../relay/key-context.ts";
import { cancelAnthropicBatch, pollAnthropicBatch, readAnthropicResults, submitAnthropicBatch } from "./anthropic-batch.ts";
import { cancelGoogleBatch, pollGoogleBatch, readGoogleResults, submitGoogleBatch } from "./google-batch.ts";
import { cancelOpenAIBatch, pollOpenAIBatch, readOpenAIResults, submitOpenAIBatch } from "./openai-batch.ts";
import { VendorBatchError, type VendorBatchState, type VendorLine } from "./vendor-call.ts";

/**
 * A result line with its answer in the shape its client endpoint answers (what a live item's result
 * holds: a chat completion for a /blitz job) and its usage.
 */
export interface ChatLine extends VendorLine {
  usage: Usage | null;
}

/** What a /blitz job's items call: chat completions. A /v1/batches batch names its own endpoint. */
export const JOB_ENDPOINT = "/v1/chat/completions";

export interface VendorBatchApi {
  /** The vendor's batch price as a share of its live price (where the catalog names no batch price). */
  discount: number;
  /** The client endpoints whose lines this vendor's batch API answers (others run live). */
  endpoints: readonly string[];
  base(ctx: Ctx): string;
  /**
   * One item's chat body → the vendor's request for it, with the lane's model. Throws a
   * GatewayError where the vendor's protocol cannot express the item: that item runs live instead,
   * where the key's lanes give it its answer or its error.
   */
  encode(body: Json, model: string, key: KeyContext): Json;
  /** `endpoint`: the client endpoint the lines were written for (one of `endpoints`). */
  submit(base: string, apiKey: string, endpoint: string, lines: { customId: string; body: Json }[]): Promise<string>;
  poll(base: string, apiKey: string, id: string): Promise<VendorBatchState>;
  cancel(base: string, apiKey: string, id: string): Promise<void>;
  /** The results of an ended batch, line by line as they are read. */
  results(base: string, apiKey: string, state: VendorBatchState): AsyncIterable<ChatLine>;
}

/** The usage of a chat completion, a Responses response or an embeddings answer. */
function openaiUsage(body: Json | null): Usage | null {
  const u = (body as { usage?: Json } | null)?.usage;
  if (!u || typeof u !== "object") return null;
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : 0);
  return {
    prompt_tokens: n(u.prompt_tokens ?? u.input_tokens),
    completion_tokens: n(u.completion_tokens ?? u.output_tokens),
    cached_tokens: n(u.prompt_tokens_details?.cached_tokens ?? u.input_tokens_details?.cached_tokens),
    cache_write_tokens: 0,
  };
}

const openai: VendorBatchApi = {
  discount: OPENAI_BATCH.discount,
  endpoints: ["/v1/chat/completions", "/v1/responses", "/v1/embeddings"],
  base: (ctx) => ctx.config.providerBaseUrls.openai,
  // A line goes to the endpoint it was written for as it is (the lane's model set): the lane's
  // protocol is the line's.
  encode: (body, model) => (body.model === model ? body : { ...body, model }),
  submit: submitOpenAIBatch,
  poll: pollOpenAIBatch,
  cancel: cancelOpenAIBatch,
  async *results(base, apiKey, state) {
    for await (const l of readOpenAIResults(base, apiKey, state)) yield { ...l, usage: l.outcome === "succeeded" ? openaiUsage(l.body) : null };
  },
};

const anthropic: VendorBatchApi = {
  discount: ANTHROPIC_BATCH.discount,
  endpoints: [JOB_ENDPOINT],
  base: (ctx) => ctx.config.providerBaseUrls.anthropic,
  // Through the same codec a live chat request on an Anthropic lane goes through, under the key's
  // translation policy (absent: adapt), so a batch item is written as its live twin would be.
  encode: (body, model, key) =>
    anthropicCodec.encodeRequest(body as ChatRequest, { model, stream: false, adapt: new AdaptLog(key.translation ?? "adapt"), hints: catalogHints("anthropic", model) }),
  submit: (base, apiKey, _endpoint, lines) => submitAnthropicBatch(base, apiKey, lines.map((l) => ({ customId: l.customId, params: l.body }))),
  poll: pollAnthropicBatch,
  cancel: cancelAnthropicBatch,
  async *results(base, apiKey, state) {
    for await (const l of readAnthropicResults(base, apiKey, state)) {
      if (l.outcome !== "succeeded" || !l.body) {
        yield { ...l, usage: null };
        continue;
      }
      const model = typeof l.body.model === "string" ? l.body.model : "";
      const { completion, usage } = anthropicCodec.decodeResponse(l.body, { model });
      yield { ...l, body: completion, usage };
    }
  },
};

const google: VendorBatchApi = {
  discount: GOOGLE_BATCH.discount,
  endpoints: [JOB_ENDPOINT],
  base: (ctx) => ctx.config.providerBaseUrls.google,
  // Through the codec a live chat request on a Google lane goes through; the model travels beside
  // the request (a Gemini batch names one model in its path).
  encode: (body, model, key) => ({
    model,
    request: geminiCodec.encodeRequest(body as ChatRequest, { model, stream: false, adapt: new AdaptLog(key.translation ?? "adapt"), hints: catalogHints("google", model) }),
  }),
  async submit(base, apiKey, _endpoint, lines) {
    const models = new Set(lines.map((l) => String(l.body.model)));
    // One model per Gemini batch: a job mixing models is refused for good, and runs live.
    if (models.size !== 1) throw new VendorBatchError(`A Gemini batch names one model; this job's items name ${models.size}.`, 400);
    return submitGoogleBatch(base, apiKey, [...models][0]!, lines.map((l) => ({ customId: l.customId, request: l.body.request as Json })));
  },
  poll: pollGoogleBatch,
  cancel: cancelGoogleBatch,
  // Inline responses arrive whole with the batch's state (the Files API output is not used).
  async *results(base, apiKey, state) {
    for (const l of await readGoogleResults(base, apiKey, state)) {
      if (l.outcome !== "succeeded" || !l.body) {
        yield { ...l, usage: null };
        continue;
      }
      const model = typeof l.body.modelVersion === "string" ? l.body.modelVersion : "";
      const { completion, usage } = geminiCodec.decodeResponse(l.body, { model });
      yield { ...l, body: completion, usage };
    }
  },
};

export const vendorBatchApis: Readonly<Record<string, VendorBatchApi>> = { openai, anthropic, google };

/**
 * The lane batch work calling `endpoint` goes to: the key's first lane, when it is an API-key lane
 * whose vendor batch API answers that endpoint; else null (the lines run live).
 */
export function vendorBatchLane(key: KeyContext, endpoint = JOB_ENDPOINT): ResolvedLane | null {
  const lane = key.lanes[0];
  if (!lane || !lane.credential || !vendorBatchApis[lane.provider]?.endpoints.includes(endpoint)) return null;
  return lane;
}

/** The vendor's batch price as a share of its live price. */
export const batchDiscount = (provider: string): number => vendorBatchApis[provider]?.discount ?? 1;
