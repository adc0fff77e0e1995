// The client side of a streaming answer. The response is committed (200, SSE headers) once a
// lane's upstream answered 2xx; bytes then flow through the lane's tap. Until a data event has
// reached the client, a broken upstream stream still falls over to the next lane inside the
// same response (keep-alive comments are not content). After that, a break ends the stream
// with an SSE error event and no [DONE], and the usage seen so far is recorded.
//
// One interval per stream does two jobs: a `:` keep-alive comment when nothing was written for
// KEEPALIVE_MS (long reasoning pauses outlive idle timeouts of Bun, proxies and clients), and
// the upstream idle timeout (UPSTREAM_TIMEOUT_SECONDS without an upstream byte aborts it).
import { clientCodecs } from "../../protocols/index.ts";
import { chatStreamError } from "../../protocols/chat/index.ts";
import { estimatedUsage, TimeoutError, type LaneResult, type RelayRequest } from "../attempt.ts";
import { scrub } from "../relay-errors.ts";
import { FailedAfterOutput, TranslateTap } from "./translate.ts";

export type StreamLane = Extract<LaneResult, { kind: "stream" }>;

export interface StreamHooks {
  /** The next lane's result after this one broke before any content reached the client. */
  nextLane(failure: { provider: string; laneIndex: number; status: number; code: string; message: string }): Promise<LaneResult>;
  /** Called once when the stream ends, however it ends. */
  done(outcome: "ok" | "broken" | "aborted" | "error", status: number, provider: string | null, ttfbMs: number | null): void;
}

export const SSE_HEADERS: Record<string, string> = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  "x-accel-buffering": "no",
};

const KEEPALIVE = new TextEncoder().encode(": keep-alive\n\n");
const enc = new TextEncoder();

function errorEvent(rr: RelayRequest, tap: StreamLane["tap"], message: string, code: string): Uint8Array {
  // A translated stream ends through its own encoder, continuing what it already wrote.
  if (tap instanceof TranslateTap) return tap.error(message);
  // Pass-through: the error continues the upstream's own event numbering (Responses sequence_number).
  const codec = clientCodecs[rr.shape];
  const text = codec ? codec.streamEncoder(rr.body, { nextSequence: tap.nextSequence() }).error(message) : chatStreamError(message, code);
  return enc.encode(text);
}

export function streamResponse(rr: RelayRequest, first: StreamLane, hooks: StreamHooks): Response {
  const { ctx } = rr;
  let cur = first;
  let reader = cur.res.body!.getReader();
  let closed = false;
  let wrote = false;
  let lastUpstream = performance.now();
  let controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  const timeoutMs = ctx.config.UPSTREAM_TIMEOUT_SECONDS * 1000;

  const ticker = setInterval(() => {
    if (closed) return;
    if (performance.now() - lastUpstream > timeoutMs) {
      cur.ac.abort(new TimeoutError());
      return;
    }
    if (!wrote && controller) {
      try {
        controller.enqueue(KEEPALIVE);
      } catch {}
    }
    wrote = false;
  }, ctx.config.KEEPALIVE_MS);

  const close = (outcome: "ok" | "broken" | "aborted" | "error", status: number) => {
    if (closed) return;
    closed = true;
    clearInterval(ticker);
    rr.signal.removeEventListener("abort", onClientGone);
    cur.done();
    hooks.done(outcome, status, cur.attempt.provider, cur.attempt.ttfbMs);
  };

  function onClientGone() {
    if (closed) return;
    cur.ac.abort();
    reader.cancel().catch(() => {});
    cur.attempt.finish(cur.res.status, "aborted", "client_closed", cur.tap.usage);
    close("aborted", 499);
  }
  rr.signal.addEventListener("abort", onClientGone);

  /** The upstream broke (or timed out). Returns true when another lane took over. */
  async function onBreak(c: ReadableStreamDefaultController<Uint8Array>, e: unknown): Promise<boolean> {
    if (closed) return false;
    if (rr.signal.aborted) {
      onClientGone();
      return false;
    }
    const timedOut = cur.ac.signal.reason instanceof TimeoutError;
    const why = timedOut
      ? `the upstream sent nothing for ${ctx.config.UPSTREAM_TIMEOUT_SECONDS} s`
      : e instanceof Error && e.message ? e.message : "the connection closed early";
    const status = cur.res.status;
    if (!cur.tap.delivered) {
      cur.attempt.finish(status, "broken", timedOut ? "timeout" : "stream_broken", cur.tap.usage);
      cur.done();
      const next = await hooks.nextLane({ provider: cur.attempt.provider, laneIndex: cur.attempt.lane.index, status, code: "stream_broken", message: `The stream broke before any content: ${why}` });
      if (closed) return false;
      if (next.kind === "stream") {
        cur = next;
        reader = cur.res.body!.getReader();
        lastUpstream = performance.now();
        return true;
      }
      if (next.kind === "aborted") {
        close("aborted", 499);
        return false;
      }
      const err = next.kind === "client" ? next.error : null;
      const message = err ? err.message : "No lane could serve the request.";
      c.enqueue(errorEvent(rr, cur.tap, message, err?.code ?? "upstream_error"));
      close("error", err?.status ?? 502);
      c.close();
      return false;
    }
    const usage = cur.tap.usage ?? estimatedUsage(rr, cur.tap.forwarded);
    cur.attempt.finish(status, "broken", timedOut ? "timeout" : "stream_broken", usage);
    c.enqueue(errorEvent(rr, cur.tap, `The upstream (${cur.attempt.provider}) stream broke off mid-answer: ${scrub(why)}. The answer above is incomplete; retry the request.`, "upstream_error"));
    close("broken", 502);
    c.close();
    return false;
  }

  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    async pull(c) {
      try {
        await pump(c);
      } catch (e) {
        // A bug, not an upstream failure: end the stream cleanly so nothing stays reserved or ticking.
        ctx.log.error({ requestId: rr.requestId, err: e instanceof Error ? e.message : String(e) }, "stream relay failed");
        if (closed) return;
        cur.ac.abort();
        cur.attempt.finish(cur.res.status, "error", "relay_failed", cur.tap.usage);
        close("error", 500);
        try {
          c.enqueue(errorEvent(rr, cur.tap, "The gateway failed while relaying the stream; retry the request.", "unhandled"));
          c.close();
        } catch {}
      }
    },
    cancel() {
      onClientGone();
    },
  });
  return new Response(stream, { status: 200, headers: SSE_HEADERS });

  /** Client bytes the tap encoded before its decoder failed in the same read go out first; returns the failure. */
  function sendEarlierOutput(c: ReadableStreamDefaultController<Uint8Array>, e: unknown): unknown {
    if (!(e instanceof FailedAfterOutput)) return e;
    if (cur.attempt.ttfbMs === null) cur.attempt.markFirstByte();
    c.enqueue(e.output);
    wrote = true;
    return e.failure;
  }

  async function pump(c: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    for (;;) {
      if (closed) return;
      let r: { done: boolean; value?: Uint8Array };
      try {
        r = await reader.read();
      } catch (e) {
        if (await onBreak(c, e)) continue;
        return;
      }
      if (closed) return;
      if (r.done) {
        let tail: Uint8Array | null;
        try {
          tail = cur.tap.end();
        } catch (e) {
          if (await onBreak(c, sendEarlierOutput(c, e))) continue;
          return;
        }
        if (tail && tail.length) c.enqueue(tail);
        if (!cur.tap.delivered) {
          // Ended cleanly without a single data event: as good as broken before the first byte.
          if (await onBreak(c, new Error("the upstream ended the stream without any event"))) continue;
          return;
        }
        cur.attempt.finish(cur.res.status, "ok", null, cur.tap.usage ?? estimatedUsage(rr, cur.tap.forwarded));
        close("ok", cur.res.status);
        c.close();
        return;
      }
      lastUpstream = performance.now();
      let out: Uint8Array | null;
      try {
        out = cur.tap.push(r.value!);
      } catch (e) {
        // An error event from the upstream (translation path) or an undecodable stream.
        if (await onBreak(c, sendEarlierOutput(c, e))) continue;
        return;
      }
      if (out && out.length) {
        if (cur.attempt.ttfbMs === null) cur.attempt.markFirstByte();
        c.enqueue(out);
        wrote = true;
        return;
      }
    }
  }
}
