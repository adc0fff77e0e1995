// The request the upstream executor (attempt.ts, lane-runner.ts) carries from lane to lane, and the
// operation it asks of each lane: inference (the default), an upload sent as it came, or a count
// of the body's input tokens.
import type { AccessEntry } from "../http/access-log.ts";
import type { AdaptLog } from "../protocols/adapt.ts";
import type { ChatRequest, ClientShape, Json } from "../protocols/types.ts";
import type { MoneyCall } from "../money/money.ts";
import type { KeyContext } from "./key-context.ts";
import type { RelayDeps } from "./relay-deps.ts";
import type { RequestAffinity } from "./routing/affinity.ts";

export type Endpoint = "chat" | "responses" | "messages" | "embeddings" | "blitz" | "batch" | "classifier" | "transcriptions" | "count_tokens" | "generate_content";

/** A file sent upstream as the client sent it (POST /v1/audio/transcriptions), to lanes whose adapter takes uploads. */
export interface Upload {
  contentType: string;
  accept: string;
  /** The whole multipart body, kept so that each lane (and the adapter's retry) can send it again. */
  bytes: Uint8Array;
}

/** One request as the executor carries it from lane to lane. */
export interface RelayRequest {
  /** What the request path uses of its gateway (relay-deps.ts), built once at mount. */
  ctx: RelayDeps;
  key: KeyContext;
  endpoint: Endpoint;
  shape: ClientShape;
  /** The client's body, parsed once; never mutated (each attempt shallow-copies). */
  body: Json;
  bytes: number;
  stream: boolean;
  model: string;
  requestId: string;
  /** Aborts when the client goes away. */
  signal: AbortSignal;
  /** The request's money: its reservation, the record of every attempt, the settlement. */
  money: MoneyCall;
  /** The request's record (a /blitz prompt's own part record): every attempt, lane and outcome is written there. */
  access: AccessEntry;
  pivot?: ChatRequest;
  /** What turning the client's body into the pivot adapted (CONTRACT §9); each lane's encoder adds to a copy. */
  pivotLog?: AdaptLog;
  /** The adapted fields of the lane planned last (`field=action, …`), null when none: the header of an answer whose headers go before a lane answers. */
  adapted?: string | null;
  /** The request's session on a key with session affinity (routing/affinity.ts); absent otherwise. */
  affinity?: RequestAffinity;
  /** The client's protocol headers (ClientCodec.forwardHeaders), for a lane that passes its request through (or counts it). */
  clientHeaders?: Record<string, string>;
  /** The operation: absent, inference (`body` planned per lane); set, this upload sent as it came. */
  upload?: Upload;
  /**
   * The operation: the input tokens of `body`, a Messages request (POST /v1/messages/count_tokens),
   * counted by the lane's vendor (adapter.countTokens). Free at the vendor: no usage record.
   */
  count?: boolean;
}

