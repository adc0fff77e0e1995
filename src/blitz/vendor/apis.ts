// The vendor batch APIs a /blitz batch job can go to (CONTRACT §9 "Batch work"), one entry per
// provider: how an item's chat body is written for the vendor, how the batch is submitted, polled,
// cancelled and read back, and the vendor's batch discount. The poller (poller.ts) names none of
// them; a provider without an entry runs batch work live.
import type { Ctx } from "../../context.ts";
import { AdaptLog } from "../../protocols/adapt.ts";
import { anthropicCodec } from "../../protocols/anthropic/index.ts";
import type { ChatRequest, Json, Usage } from "../../protocols/types.ts";
import { ANTHROPIC_BATCH } from "../../providers/anthropic/batch.ts";
import { catalogHints } from "../../providers/catalog-hints.ts";
import { OPENAI_BATCH } from "../../providers/openai/batch.ts";
import type { ResolvedLane } from "../../providers/types.ts";
import type { KeyContext } from "../../relay/key-context.ts";
import { cancelAnthropicBatch, pollAnthropicBatch, readAnthropicResults, submitAnthropicBatch } from "./anthropic-batch.ts";
import { cancelOpenAIBatch, pollOpenAIBatch, readOpenAIResults, submitOpenAIBatch, type VendorBatchState, type VendorLine } from "./openai-batch.ts";

/** A result line with its answer in the chat shape (what a live item's result holds) and its usage. */
export interface ChatLine extends VendorLine {
  usage: Usage | null;
}

export interface VendorBatchApi {
  /** The vendor's batch price as a share of its live price (where the catalog names no batch price). */
  discount: number;
  base(ctx: Ctx): string;
  /**
   * One item's chat body → the vendor's request for it, with the lane's model. Throws a
   * GatewayError where the vendor's protocol cannot express the item: that item runs live instead,
   * where the key's lanes give it its answer or its error.
   */
  encode(body: ChatRequest, model: string, key: KeyContext): Json;
  submit(base: string, apiKey: string, lines: { customId: string; body: Json }[]): Promise<string>;
  poll(base: string, apiKey: string, id: string): Promise<VendorBatchState>;
  cancel(base: string, apiKey: string, id: string): Promise<void>;
  results(base: string, apiKey: string, state: VendorBatchState): Promise<ChatLine[]>;
}

function openaiUsage(body: Json | null): Usage | null {
  const u = (body as { usage?: { prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } } } | null)?.usage;
  if (!u) return null;
  return { prompt_tokens: u.prompt_tokens ?? 0, completion_tokens: u.completion_tokens ?? 0, cached_tokens: u.prompt_tokens_details?.cached_tokens ?? 0, cache_write_tokens: 0 };
}

const openai: VendorBatchApi = {
  discount: OPENAI_BATCH.discount,
  base: (ctx) => ctx.config.providerBaseUrls.openai,
  // A chat body goes to /v1/chat/completions as it is: the lane's protocol is the item's.
  encode: (body, model) => (body.model === model ? body : { ...body, model }),
  submit: (base, apiKey, lines) => submitOpenAIBatch(base, apiKey, "/v1/chat/completions", lines),
  poll: pollOpenAIBatch,
  cancel: cancelOpenAIBatch,
  async results(base, apiKey, state) {
    return (await readOpenAIResults(base, apiKey, state)).map((l) => ({ ...l, usage: l.outcome === "succeeded" ? openaiUsage(l.body) : null }));
  },
};

const anthropic: VendorBatchApi = {
  discount: ANTHROPIC_BATCH.discount,
  base: (ctx) => ctx.config.providerBaseUrls.anthropic,
  // Through the same codec a live chat request on an Anthropic lane goes through, under the key's
  // translation policy (absent: adapt), so a batch item is written as its live twin would be.
  encode: (body, model, key) =>
    anthropicCodec.encodeRequest(body, { model, stream: false, adapt: new AdaptLog(key.translation ?? "adapt"), hints: catalogHints("anthropic", model) }),
  submit: (base, apiKey, lines) => submitAnthropicBatch(base, apiKey, lines.map((l) => ({ customId: l.customId, params: l.body }))),
  poll: pollAnthropicBatch,
  cancel: cancelAnthropicBatch,
  async results(base, apiKey, state) {
    return (await readAnthropicResults(base, apiKey, state)).map((l) => {
      if (l.outcome !== "succeeded" || !l.body) return { ...l, usage: null };
      const model = typeof l.body.model === "string" ? l.body.model : "";
      const { completion, usage } = anthropicCodec.decodeResponse(l.body, { model });
      return { ...l, body: completion, usage };
    });
  },
};

export const vendorBatchApis: Readonly<Record<string, VendorBatchApi>> = { openai, anthropic };

/** The lane a batch job's items go to, or null when it has no vendor batch API (items then run live). */
export function vendorBatchLane(key: KeyContext): ResolvedLane | null {
  const lane = key.lanes[0];
  if (!lane || !lane.credential || !vendorBatchApis[lane.provider]) return null;
  return lane;
}

/** The vendor's batch price as a share of its live price. */
export const batchDiscount = (provider: string): number => vendorBatchApis[provider]?.discount ?? 1;
