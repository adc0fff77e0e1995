// Wire formats and the codecs between them. Pure: no I/O, no vendor URLs or headers.
//
// The pivot is the OpenAI Chat Completions shape. A client request in either shape becomes a
// chat request; a lane speaking another protocol gets it encoded from there, and its answer is
// decoded back to chat and then to the client's shape. When the client's shape IS the lane's
// protocol, none of this runs: the relay passes the bytes through (see relay/stream/).
import type { GatewayError } from "../errors.ts";
import type { AdaptLog } from "./adapt.ts";

/** Protocols a lane can speak upstream. */
export type WireProtocol = "chat" | "responses" | "anthropic" | "gemini" | "embeddings" | "gemini-embeddings";
/** Shapes a client can send. */
export type ClientShape = "chat" | "responses" | "anthropic" | "embeddings" | "gemini";

/** Token counts of one attempt; every codec fills what its protocol reports. */
export interface Usage {
  /** All input tokens, cached and cache-write tokens included (OpenAI's meaning; cost is split by the counts below). */
  prompt_tokens: number;
  completion_tokens: number;
  /** Input tokens served from the provider's cache (priced lower). */
  cached_tokens: number;
  /** Input tokens written to the provider's cache (Anthropic cache creation), every TTL. */
  cache_write_tokens: number;
  /** Of cache_write_tokens, those written for one hour (Anthropic `ephemeral_1h_input_tokens`; priced higher than 5-minute writes). */
  cache_write_1h_tokens?: number;
  reasoning_tokens?: number;
  /**
   * The gateway's own price of the request in USD (CONTRACT §9), set by the relay on the usage an
   * answer carries; never read from an upstream (an upstream's own `cost` is not the gateway's).
   */
  cost?: number;
}

export type Json = Record<string, any>;

/**
 * Reasoning in the pivot. A delta's `reasoning_content` is a piece of the model's reasoning text
 * (the field DeepSeek-style chat APIs send, so a chat client sees it as they do). A delta's
 * `reasoning_end` closes one reasoning block and carries what its vendor attached to it, which a
 * client of that vendor's protocol must get back unchanged; a message's `reasoning_blocks` are the
 * same blocks, whole. Both are the gateway's own: the chat encoders leave them out.
 */
export interface ReasoningEnd {
  /** Anthropic thinking block signature. */
  signature?: string;
  /** Anthropic redacted_thinking `data` (a block with no text). */
  redacted?: string;
  /** OpenAI Responses reasoning item `encrypted_content`. */
  encrypted_content?: string;
  /** Responses: the next block is another summary part of the same reasoning item. */
  more?: boolean;
}

/** One whole reasoning block of a message (`reasoning_blocks`). */
export interface ReasoningBlock extends ReasoningEnd {
  text: string;
}

/** A chat-completions request (the pivot). Unknown fields ride along untouched. */
export interface ChatRequest extends Json {
  model: string;
  messages: Json[];
  stream?: boolean;
}

/** One parsed server-sent event. */
export interface SseEvent {
  event?: string;
  data: string;
  id?: string;
}

/** What an upstream error means for routing. */
export interface UpstreamErrorInfo {
  message: string;
  /** Moves to the next lane (429, 5xx, overloaded…). */
  retryable: boolean;
  /** The upstream does not know the requested model (fallback_to_default_model applies). */
  modelNotFound: boolean;
  /** The upstream's own error code, when it gave one (shown to the client on a non-retryable 4xx). */
  code?: string;
  /** The upstream's own `param` (the request parameter at fault), kept in the client's error object. */
  param?: string;
}

/** Incremental decoder of an upstream stream into chat chunks (state lives in the closure). */
export interface ChunkDecoder {
  /** One upstream SSE event → zero or more chat.completion.chunk objects. Throws UpstreamStreamError on an error event. */
  push(ev: SseEvent): Json[];
  /** End of upstream stream → any final chunks. */
  end(): Json[];
  /** Usage seen so far (null when the upstream reported none). */
  usage(): Usage | null;
}

/** What the lane vendor's model catalog says of a model; absent or null: not known. */
export interface ModelHints {
  /** The model thinks (extended thinking, a thinking budget). */
  reasons?: boolean | null;
  /** The most output tokens the model writes in one answer. */
  maxOutputTokens?: number | null;
}

/** What an encoder is told: the lane's model, whether the answer streams, the translation policy's log. */
export interface EncodeOptions {
  model: string;
  stream: boolean;
  /** The request's translation policy and the log of what was adapted (absent: strict, nothing noted). */
  adapt?: AdaptLog;
  /** The lane's model as its vendor's catalog knows it (an adapted field is fitted to it). */
  hints?: ModelHints;
}

/** Codec between the chat pivot and one upstream protocol. */
export interface UpstreamCodec {
  readonly protocol: WireProtocol;
  /**
   * Chat request → upstream JSON body. Throws GatewayError 400 unsupported_feature for what it
   * cannot express; `adapt` (absent: strict) decides what is mapped or dropped instead, and is told.
   */
  encodeRequest(req: ChatRequest, opts: EncodeOptions): Json;
  /** Upstream JSON answer → chat.completion + usage. */
  decodeResponse(body: Json, opts: { model: string }): { completion: Json; usage: Usage | null };
  streamDecoder(opts: { model: string; id: string; created: number }): ChunkDecoder;
  /** Upstream non-2xx answer → routing meaning. */
  errorOf(status: number, bodyText: string): UpstreamErrorInfo;
  /** Usage block of a native (pass-through) answer or of one stream event's data; null when absent. */
  usageOf(body: Json): Usage | null;
  /** The JSON key of a stream event's usage block, which a pass-through tap looks for in the bytes. Default `usage`. */
  usageKey?: string;
  /**
   * Pass-through: a client body already in this protocol → the upstream body (shallow copy, `model`
   * set, usage requested on streams). A protocol without it is never passed through untranslated.
   */
  passThroughRequest?(body: Json, opts: EncodeOptions): Json;
  /**
   * Pass-through streams whose usage arrives in parts (Anthropic: input in message_start, output in
   * message_delta): the usage so far after one event that carries a usage block. Default: usageOf.
   */
  streamUsage?(prev: Usage | null, event: Json): Usage | null;
  /**
   * Pass-through streams: the usage object of a parsed event that carries the answer's usage for
   * the client (chat: the usage chunk; Responses: response.completed; Messages: message_delta),
   * where the gateway writes its `cost` (CONTRACT §9); null for any other event.
   */
  usageHolder?(event: Json): Json | null;
  /** Pass-through streams: a parsed event the client did not ask for (chat: the include_usage chunk). */
  hideFromClient?(event: Json, request: Json): boolean;
  /**
   * Pass-through streams: true when the stream's last event (its `data`, and its `event` name) is
   * the protocol's terminator. A stream that ends on anything else was cut off: broken, not ok
   * (CONTRACT §8). Read once, at the end of the stream.
   */
  isTerminal?(data: string, event: string | null): boolean;
}

/** Incremental encoder of chat chunks into the client's SSE bytes. */
export interface ChunkEncoder {
  push(chunk: Json): string;
  /** Normal end (`data: [DONE]` for chat, `response.completed` for responses). */
  end(usage: Usage | null): string;
  /**
   * Broken stream after the first byte: an SSE error event and no [DONE]. `cause` is the error a
   * response not yet started would have answered (a stream opened early by keep-alive comments);
   * without it the event says the upstream broke off (a server error).
   */
  error(message: string, cause?: GatewayError): string;
}

/** Codec between a client shape and the chat pivot. */
export interface ClientCodec {
  readonly shape: ClientShape;
  /** Client body → chat pivot. Throws GatewayError 400 for what the pivot cannot carry; `adapt` as in EncodeOptions. */
  toPivot(body: Json, adapt?: AdaptLog): ChatRequest;
  /** The client's names of pivot fields that differ (Responses `reasoning.effort` for `reasoning_effort`), for the adapted-fields list. */
  readonly fieldNames?: Readonly<Record<string, string>>;
  /** Chat completion → client's answer shape. */
  fromPivot(completion: Json, usage: Usage | null, request: Json): Json;
  /** `nextSequence`: the Responses `sequence_number` to continue from (an error after pass-through events). */
  streamEncoder(request: Json, opts?: { nextSequence?: number }): ChunkEncoder;
  /** Request headers of this protocol that a lane speaking it natively receives as sent (pass-through only). */
  readonly forwardHeaders?: readonly string[];
}

/**
 * A client shape a protocol serves without the chat pivot (embeddings): the request and the answer
 * are mapped directly. Never streams.
 */
export interface DirectCodec {
  encodeRequest(body: Json, opts: { model: string }): Json;
  /** The upstream's answer → the client's (null: the upstream's bytes already are it) and usage. */
  decodeResponse(body: Json, opts: { model: string; request: Json }): { body: Json | null; usage: Usage | null };
  errorOf(status: number, bodyText: string): UpstreamErrorInfo;
}

export class UpstreamStreamError extends Error {
  override name = "UpstreamStreamError";
  constructor(message: string, readonly retryable = true) {
    super(message);
  }
}

export const emptyUsage = (): Usage => ({ prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 });
