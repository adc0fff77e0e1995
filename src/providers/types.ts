// A provider adapter is the only code that knows a vendor's URL, headers and quirks.
// Shared code picks an adapter from providers/registry.ts by the lane's `provider` and never
// branches on vendor names.
import type { AdapterEnv } from "./env.ts";
import type { LaneRow } from "../store/db/schema/routing.ts";
import type { Json, ModelHints, WireProtocol } from "../protocols/types.ts";

/** A lane as the relay sees it at request time: the stored lane plus what it references, decrypted lazily. */
export interface ResolvedLane extends LaneRow {
  index: number;
  /** API-key lanes: the saved credential (null when it was deleted). */
  credential: { id: string; apiKeyCiphertext: string } | null;
  /** Bridge lanes: the registered bridge (null when revoked or not found). */
  bridge: { id: string; baseUrl: string; tokenCiphertext: string; status: string } | null;
  /** Sub lanes: the sub session (null when none). */
  subSession: { id: string; status: string; provisioned: boolean; lastError: string | null } | null;
}

/** Per-lane settings of SPEC's Lane table that only some providers accept. */
export const LANE_SETTINGS = ["reasoning_effort", "verbosity", "service_tier"] as const;
export type LaneSetting = (typeof LANE_SETTINGS)[number];

export interface UpstreamCall {
  url: string;
  headers: Record<string, string>;
  body: string;
  /** The model actually asked for, when the adapter resolved an alias and the body does not say it (priced and recorded). */
  model?: string;
}

export interface AdapterRequestArgs {
  ctx: AdapterEnv;
  lane: ResolvedLane;
  protocol: WireProtocol;
  /** Upstream body for `protocol`, before per-lane settings; the adapter may add them. */
  body: Json;
  model: string;
  stream: boolean;
  /** Pass-through only: the client's protocol headers (ClientCodec.forwardHeaders) it sent, lower-case names. */
  clientHeaders?: Record<string, string>;
}

/** A transcription as the relay hands it to the adapter (see ProviderAdapter.transcribe). */
export interface TranscriptionCall {
  contentType: string;
  accept: string;
  body: () => ReadableStream<Uint8Array>;
  signal: AbortSignal;
}

export interface ProviderAdapter {
  readonly id: string;
  readonly kind: "api_key" | "sub" | "bridge";
  /** Protocols spoken natively, preferred first. A client shape in this list passes through untranslated. */
  readonly protocols: readonly WireProtocol[];
  /** Seat traffic (subscription): priced, excluded from budgets while budget_excludes_seats. */
  readonly seat: boolean;
  /** Provider id in the pricing catalog (@pydantic/genai-prices) when it differs from `id`. */
  readonly pricingId?: string;
  /**
   * Lane aliases the general catalog (`GET /v1/models` without a key) lists for this provider, owned
   * by its kind (SPEC Model entry): `sub/flagship`, `bridge/coding-agent`… None when absent.
   */
  readonly catalogAliases?: readonly string[];
  /** Per-lane settings a lane of this provider accepts (applied by applySettings); none when absent. */
  readonly settings?: readonly LaneSetting[];
  /**
   * The model ids the lane can really be called with, for `GET /v1/models` with a key (CONTRACT §4,
   * §8): aliases that resolve included, [] when the lane cannot serve or its source cannot be
   * reached (never throws for that). Default: the lane's model, or else the catalog's models for pricingId.
   */
  models?(ctx: AdapterEnv, lane: ResolvedLane, signal: AbortSignal): Promise<string[]>;
  /**
   * Speech-to-text (POST /v1/audio/transcriptions, CONTRACT §4): sends the multipart body to the
   * vendor's transcription endpoint with the lane's credentials and returns the answer as it is.
   * `body` is called once a send (a retry after a token refresh asks again). Absent: the lane
   * cannot transcribe.
   */
  transcribe?(ctx: AdapterEnv, lane: ResolvedLane, call: TranscriptionCall): Promise<Response>;
  /** Whether the lane can serve now; a reason string makes the lane fail over with that reason. */
  unavailable(lane: ResolvedLane): string | null;
  /** Applies per-lane settings (reasoning_effort…) to the upstream body, in place. */
  applySettings(body: Json, lane: ResolvedLane, protocol: WireProtocol): void;
  /**
   * Adjusts, in place, a body the gateway translated from another client protocol (never the
   * client's own body, which passes through as sent) to what this vendor accepts for `model`.
   * Runs before applySettings, so a lane setting still wins.
   */
  fitTranslated?(body: Json, protocol: WireProtocol, model: string): void;
  /**
   * What this vendor's catalog says of `model` (thinks, most output tokens), which a translating
   * encoder fits an adapted field to (CONTRACT §9: an effort a model cannot think with is dropped).
   */
  modelHints?(model: string): ModelHints;
  /**
   * Builds the upstream HTTP call (URL, auth headers, serialized body). prepare and send may throw a
   * GatewayError: `retryable: true` fails this lane over, otherwise it goes back to the client.
   */
  prepare(args: AdapterRequestArgs): Promise<UpstreamCall> | UpstreamCall;
  /**
   * Exact input-token counting of a request in the vendor's own protocol (a Messages request on
   * POST /v1/messages/count_tokens, a Gemini one on /v1beta/models/{model}:countTokens), on lanes
   * whose vendor offers it; `body` is the client's, `model` set. Other lanes get the relay's estimate.
   */
  countTokens?(args: { ctx: AdapterEnv; lane: ResolvedLane; body: Json; clientHeaders?: Record<string, string> }): UpstreamCall;
  /** Sends it. Default: fetch. `sub` refreshes on 401; `bridge` pins the checked address. */
  send(ctx: AdapterEnv, lane: ResolvedLane, call: UpstreamCall, signal: AbortSignal): Promise<Response>;
}
