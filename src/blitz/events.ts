// Streamed /blitz (CONTRACT §8): server-sent events, one `item` event per prompt in the order the
// prompts finish, a `:` keep-alive comment after every KEEPALIVE_MS in which nothing was written
// (so idle timeouts of proxies and clients do not cut a batch whose prompts are slow), and one
// final `done` event with the batch's summary. The client going away (the stream is cancelled)
// calls `onGone`, which cancels the prompts that have not started; those that ran are charged as
// any abandoned request is.
import { SSE_HEADERS } from "../relay/stream/sse-headers.ts";

const enc = new TextEncoder();
const KEEPALIVE = enc.encode(": keep-alive\n\n");

export function sseEvent(event: string, data: unknown): Uint8Array {
  return enc.encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

export interface EventSink {
  /** Sends one `item` event now (dropped when the client is gone). */
  item(data: unknown): void;
}

/**
 * An SSE response driven by `run`, which calls `sink.item` as results arrive and resolves with the
 * summary sent as `done`. The headers and a first comment go out at once: the client learns the
 * batch was admitted before any prompt finishes.
 */
export function blitzEventStream(keepAliveMs: number, onGone: () => void, run: (sink: EventSink) => Promise<unknown>): Response {
  let closed = false;
  let wrote = false;
  let ticker: ReturnType<typeof setInterval> | undefined;
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      const send = (bytes: Uint8Array) => {
        if (closed) return;
        try {
          c.enqueue(bytes);
          wrote = true;
        } catch {
          closed = true;
        }
      };
      send(KEEPALIVE);
      ticker = setInterval(() => {
        if (!wrote) send(KEEPALIVE);
        wrote = false;
      }, keepAliveMs);
      // Runs whether or not anything reads: the batch's money settles even if the client stalls.
      run({ item: (data) => send(sseEvent("item", data)) })
        .then((summary) => send(sseEvent("done", summary)), () => send(sseEvent("error", { error: "The gateway failed while running the batch; the results above are final, the missing prompts did not complete.", code: "unhandled" })))
        .finally(() => {
          clearInterval(ticker);
          if (closed) return;
          closed = true;
          try {
            c.close();
          } catch {}
        });
    },
    cancel() {
      closed = true;
      clearInterval(ticker);
      onGone();
    },
  });
  return new Response(stream, { status: 200, headers: SSE_HEADERS });
}
