// What the stream relay (relay-stream.ts) needs of a lane's stream, whichever way its bytes go:
// passed through as they are (sse-tap.ts) or translated between protocols (translate.ts).
import type { Usage } from "../../protocols/types.ts";

/** Bytes for the client from one upstream read: one region, or several to write in order. */
export type TapBytes = Uint8Array | Uint8Array[];

export interface Tap {
  /** The upstream's usage counts seen so far, or null. */
  readonly usage: Usage | null;
  /** A data event has reached the client (after this, no fallback: the client has content). */
  readonly delivered: boolean;
  /**
   * CONTRACT §9: the protocol's terminal event of a finished answer (not an error event) has been
   * handed to the client. From then on the request is served, whatever the client does next.
   */
  readonly served: boolean;
  /** Client writes produced. */
  readonly forwarded: number;
  /** Output tokens counted from the deltas (delta-count.ts): what an answer cut short is charged. */
  readonly outputTokens: number;
  /**
   * Upstream bytes in → bytes for the client (null when nothing is complete yet). Throws on an
   * upstream error event or an undecodable stream; FailedAfterOutput when client bytes from the
   * same read came before the failure.
   */
  push(chunk: Uint8Array): TapBytes | null;
  /** End of upstream: the last bytes for the client; throws as push() does for a stream cut off. */
  end(): TapBytes | null;
  /**
   * The client's error event for a stream broken after this tap wrote to it, continuing what went
   * out before (a Responses stream keeps its sequence_number). `code` is the error's code where the
   * client protocol carries one.
   */
  error(message: string, code: string): Uint8Array;
}

/** The decoder failed after client bytes were encoded from the same read: send `output`, then handle `failure`. */
export class FailedAfterOutput extends Error {
  override name = "FailedAfterOutput";
  constructor(readonly output: TapBytes, readonly failure: unknown) {
    super(failure instanceof Error ? failure.message : String(failure));
  }
}
