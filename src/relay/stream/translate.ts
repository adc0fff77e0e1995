// The translating relay: upstream SSE in the lane's protocol → chat chunks (upstream codec's
// decoder) → the client's SSE (client codec's encoder). Used only when the client's shape is not
// a protocol the lane speaks; the same-protocol case never comes here (see sse-tap.ts).
import { createSseDecoder, type SseDecoder } from "../../protocols/sse.ts";
import type { ChunkDecoder, ChunkEncoder, Json, SseEvent, Usage } from "../../protocols/types.ts";
import { chunkDeltaTokens } from "./delta-count.ts";
import { costNumber } from "./usage-cost.ts";
import { FailedAfterOutput, type Tap } from "./tap.ts";

const enc = new TextEncoder();

export class TranslateTap implements Tap {
  delivered = false;
  /** The encoder's normal ending went out (end()); an error ending does not count. */
  served = false;
  forwarded = 0;
  /** Output tokens counted from the deltas decoded (delta-count.ts): what an answer cut short is charged. */
  outputTokens = 0;
  /** The one SSE decoder (protocols/sse.ts): bytes split anywhere, CRLF, UTF-8 across chunks. */
  private sse: SseDecoder = createSseDecoder();

  /**
   * `costOf`: the request's cost once this attempt is recorded with the given usage
   * (MoneyCall.quote), carried in the usage of the encoder's ending (CONTRACT §9).
   */
  constructor(private decoder: ChunkDecoder, private encoder: ChunkEncoder, private costOf?: (u: Usage) => number) {}

  get usage(): Usage | null {
    return this.decoder.usage();
  }

  /**
   * Upstream bytes → client bytes (null when nothing complete). Throws UpstreamStreamError on an
   * upstream error event, or FailedAfterOutput when content from the same read came before it.
   */
  push(chunk: Uint8Array): Uint8Array | null {
    return this.drain(this.sse.push(chunk), false);
  }

  /**
   * End of upstream: the decoder's last chunks and the encoder's normal ending. An event whose
   * last line was cut off mid-way is dropped (a truncated stream), as the decoder does everywhere.
   */
  end(): Uint8Array | null {
    const body = this.drain(this.sse.end(), true) ?? new Uint8Array(0);
    const usage = this.decoder.usage();
    const tail = enc.encode(this.encoder.end(usage && this.costOf ? { ...usage, cost: costNumber(this.costOf(usage)) } : usage));
    const out = new Uint8Array(body.length + tail.length);
    out.set(body, 0);
    out.set(tail, body.length);
    this.served = true;
    return out;
  }

  /**
   * The client's error event for a stream broken after this tap wrote to it, from the same encoder:
   * a Responses stream keeps its sequence_number and ends with response.failed carrying the error.
   */
  error(message: string, _code?: string): Uint8Array {
    return enc.encode(this.encoder.error(message));
  }

  private drain(events: SseEvent[], final: boolean): Uint8Array | null {
    let s = "";
    try {
      for (const ev of events) for (const c of this.decoder.push(ev)) s += this.encode(c);
      if (final) for (const c of this.decoder.end()) s += this.encode(c);
    } catch (e) {
      // An upstream error event later in the same read: what was decoded before it still goes out.
      if (s === "") throw e;
      throw new FailedAfterOutput(this.take(s), e);
    }
    if (s === "") return null;
    return this.take(s);
  }

  private encode(chunk: Json): string {
    this.outputTokens += chunkDeltaTokens(chunk);
    return this.encoder.push(chunk);
  }

  private take(s: string): Uint8Array {
    this.delivered = true;
    this.forwarded++;
    return enc.encode(s);
  }
}
