// The client side of a streaming answer. The response is committed (200, SSE headers) once a
// lane's upstream answered 2xx, or earlier when the upstream stays silent for KEEPALIVE_MS before
// its first byte (keepAliveResponse, CONTRACT §8); bytes then flow through the lane's tap. Until a data event has
// reached the client, a broken upstream stream still falls over to the next lane inside the
// same response (keep-alive comments are not content). After that, a break ends the stream
// with an SSE error event and no [DONE], and the usage seen so far is recorded.
//
// One interval per stream does two jobs: a `:` keep-alive comment when nothing was written for
// KEEPALIVE_MS (long reasoning pauses outlive idle timeouts of Bun, proxies and clients), and
// the upstream idle timeout (UPSTREAM_TIMEOUT_SECONDS without an upstream byte aborts it).
import { clientCodecs } from "../../protocols/index.ts";
import { chatStreamError } from "../../protocols/chat/index.ts";
import { abandonedCode, TimeoutError, usageSoFar, type LaneResult, type RelayRequest } from "../attempt.ts";
import type { GatewayError } from "../../errors.ts";
import { scrub } from "../relay-errors.ts";
import { SSE_HEADERS } from "./sse-headers.ts";
import { FailedAfterOutput, type TapBytes } from "./tap.ts";

export type StreamLane = Extract<LaneResult, { kind: "stream" }>;

export interface StreamHooks {
  /** The next lane's result after this one broke before any content reached the client. */
  nextLane(failure: { provider: string; laneIndex: number; status: number; code: string; message: string }): Promise<LaneResult>;
  /** Called once when the stream ends, however it ends. */
  done(outcome: "ok" | "broken" | "aborted" | "error", status: number, provider: string | null, ttfbMs: number | null): void;
}


const KEEPALIVE = new TextEncoder().encode(": keep-alive\n\n");
const enc = new TextEncoder();

/** One read's client bytes, in order (a tap may hand back a joined event and a view of the rest). */
function enqueueAll(c: ReadableStreamDefaultController<Uint8Array>, out: TapBytes): void {
  if (out instanceof Uint8Array) {
    if (out.length) c.enqueue(out);
  } else for (const b of out) if (b.length) c.enqueue(b);
}

/** The committed client stream of one lane's answer (and of any lane that takes over). */
export function streamResponse(rr: RelayRequest, first: StreamLane, hooks: StreamHooks): Response {
  let relay: Relay;
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      relay = relayInto(rr, first, hooks, c);
    },
    pull: () => relay.pull(),
    cancel: () => relay.cancel(),
  });
  return new Response(stream, { status: 200, headers: SSE_HEADERS });
}

/**
 * CONTRACT §8: the upstream sent nothing for KEEPALIVE_MS before its first byte. The client gets
 * the SSE headers and a `:` comment now, and another every KEEPALIVE_MS until a lane answers;
 * that lane's stream then goes into the same response through the same relay. When every lane
 * fails instead, the stream ends with the client protocol's SSE error event. `pending` is the
 * lane runner's first result; `errorOf` turns a result that is not a stream into the client's error.
 */
export function keepAliveResponse(rr: RelayRequest, pending: Promise<LaneResult>, hooks: StreamHooks & { errorOf(r: LaneResult): GatewayError }): Response {
  let relay: Relay | null = null;
  let gone = false;
  let ready!: Promise<void>;
  let ticker: ReturnType<typeof setInterval> | undefined;
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(KEEPALIVE);
      ticker = setInterval(() => {
        try {
          c.enqueue(KEEPALIVE);
        } catch {}
      }, rr.ctx.config.KEEPALIVE_MS);
      // Settled here, not in pull(): the request's money and record close even if nothing reads.
      ready = pending.then(
        (r) => {
          clearInterval(ticker);
          if (r.kind === "stream") {
            relay = relayInto(rr, r, hooks, c);
            if (gone || rr.signal.aborted) relay.cancel(); // the client left as the lane answered: abort it and settle
            return;
          }
          if (r.kind === "aborted") {
            hooks.done("aborted", 499, null, null);
            return;
          }
          const err = hooks.errorOf(r);
          hooks.done("error", err.status, null, null);
          endWithError(c, rr, err.message, err);
        },
        (e) => {
          clearInterval(ticker);
          rr.ctx.log.error({ requestId: rr.requestId, err: e instanceof Error ? e.message : String(e) }, "lane runner failed during keep-alive");
          hooks.done("error", 500, null, null);
          endWithError(c, rr, "The gateway failed while waiting for the upstream; retry the request.");
        },
      );
    },
    // Every client read of a stream comes here: once the lane answered, straight to the relay,
    // with no async frame or promise of its own (a chunk's allocations set the collector's pace).
    pull() {
      if (relay) return relay.pull();
      return ready.then(() => relay?.pull());
    },
    cancel() {
      gone = true;
      clearInterval(ticker);
      // Before a lane answered, the client's abort signal already aborts the upstream attempt
      // (attempt.ts) and the runner's result settles above; after, the relay handles it.
      relay?.cancel();
    },
  });
  return new Response(stream, { status: 200, headers: SSE_HEADERS });
}

/**
 * The error event of a stream that carried nothing but comments: a fresh encoder of the client's
 * protocol, typed as the error the client would have had as a JSON answer (a 400 stays an
 * invalid_request_error, a 429 a rate_limit_error).
 */
function endWithError(c: ReadableStreamDefaultController<Uint8Array>, rr: RelayRequest, message: string, cause?: GatewayError): void {
  const codec = clientCodecs[rr.shape];
  try {
    c.enqueue(enc.encode(codec ? codec.streamEncoder(rr.body).error(message, cause) : chatStreamError(message, cause)));
    c.close();
  } catch {}
}

interface Relay {
  /** Moves the stream on by one client write (the ReadableStream's pull). */
  pull(): Promise<void>;
  /** The client went away. */
  cancel(): void;
}

/**
 * The relay core: drives `first` (and any lane that takes over before content) into the client
 * stream's controller `c`, which may already carry keep-alive comments.
 */
function relayInto(rr: RelayRequest, first: StreamLane, hooks: StreamHooks, c: ReadableStreamDefaultController<Uint8Array>): Relay {
  const { ctx } = rr;
  let cur = first;
  let reader = cur.res.body!.getReader();
  let closed = false;
  let wrote = false;
  let lastUpstream = performance.now();
  const timeoutMs = ctx.config.UPSTREAM_TIMEOUT_SECONDS * 1000;

  const ticker = setInterval(() => {
    if (closed) return;
    if (performance.now() - lastUpstream > timeoutMs) {
      cur.ac.abort(new TimeoutError());
      return;
    }
    if (!wrote) {
      try {
        c.enqueue(KEEPALIVE);
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

  /** The upstream's counts so far, completed by the gateway's (CONTRACT §7: an abandoned answer pays what it used). */
  const soFar = () => usageSoFar(rr, cur.tap.usage, cur.tap.outputTokens);

  /** Lets the current upstream go: its call aborted, its body cancelled. */
  const releaseUpstream = () => {
    cur.ac.abort();
    reader.cancel().catch(() => {});
  };

  function onClientGone() {
    if (closed) return;
    releaseUpstream();
    // CONTRACT §9: the answer's terminal event reached the client (Codex hangs up on
    // response.completed before the upstream's end): served, not abandoned.
    if (cur.tap.served) {
      cur.attempt.finish(cur.res.status, "ok", null, cur.tap.usage ?? soFar().usage);
      close("ok", cur.res.status);
      return;
    }
    const { usage, counted } = soFar();
    cur.attempt.finish(cur.res.status, "aborted", abandonedCode("client_closed", counted), usage);
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
    // The failed upstream is let go whatever broke it: a tap that refused its bytes (an event past
    // the size limit, an error event) leaves the connection open, and the upstream would go on
    // sending (and a vendor generating, at its price) into a socket nobody reads.
    releaseUpstream();
    const why = timedOut
      ? `the upstream sent nothing for ${ctx.config.UPSTREAM_TIMEOUT_SECONDS} s`
      : e instanceof Error && e.message ? e.message : "the connection closed early";
    const status = cur.res.status;
    if (!cur.tap.delivered) {
      // Timed out: the gateway abandons an attempt the upstream accepted, and pays what it used.
      if (timedOut) {
        const { usage, counted } = soFar();
        cur.attempt.finish(status, "aborted", abandonedCode("timeout", counted), usage);
      } else cur.attempt.finish(status, "broken", "stream_broken", cur.tap.usage);
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
      c.enqueue(cur.tap.error(message, err?.code ?? "upstream_error"));
      close("error", err?.status ?? 502);
      c.close();
      return false;
    }
    const { usage, counted } = soFar();
    if (timedOut) cur.attempt.finish(status, "aborted", abandonedCode("timeout", counted), usage);
    else cur.attempt.finish(status, "broken", "stream_broken", usage);
    c.enqueue(cur.tap.error(`The upstream (${cur.attempt.provider}) stream broke off mid-answer: ${scrub(why)}. The answer above is incomplete; retry the request.`, "upstream_error"));
    close("broken", 502);
    c.close();
    return false;
  }

  return {
    pull: () => pump(c),
    cancel: onClientGone,
  };

  /** A bug, not an upstream failure: end the stream cleanly so nothing stays reserved or ticking. */
  function onRelayBug(c: ReadableStreamDefaultController<Uint8Array>, e: unknown): void {
    ctx.log.error({ requestId: rr.requestId, err: e instanceof Error ? e.message : String(e) }, "stream relay failed");
    if (closed) return;
    releaseUpstream();
    cur.attempt.finish(cur.res.status, "error", "relay_failed", soFar().usage);
    close("error", 500);
    try {
      c.enqueue(cur.tap.error("The gateway failed while relaying the stream; retry the request.", "unhandled"));
      c.close();
    } catch {}
  }

  /** Client bytes the tap encoded before its decoder failed in the same read go out first; returns the failure. */
  function sendEarlierOutput(c: ReadableStreamDefaultController<Uint8Array>, e: unknown): unknown {
    if (!(e instanceof FailedAfterOutput)) return e;
    if (cur.attempt.ttfbMs === null) cur.attempt.markFirstByte();
    enqueueAll(c, e.output);
    wrote = true;
    return e.failure;
  }

  /** One client read: upstream reads until the tap has bytes for the client (or the stream ends). */
  async function pump(c: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    try {
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
          let tail: TapBytes | null;
          try {
            tail = cur.tap.end();
          } catch (e) {
            if (await onBreak(c, sendEarlierOutput(c, e))) continue;
            return;
          }
          if (tail) enqueueAll(c, tail);
          if (!cur.tap.delivered) {
            // Ended cleanly without a single data event: as good as broken before the first byte.
            if (await onBreak(c, new Error("the upstream ended the stream without any event"))) continue;
            return;
          }
          cur.attempt.finish(cur.res.status, "ok", null, cur.tap.usage ?? soFar().usage);
          close("ok", cur.res.status);
          c.close();
          return;
        }
        lastUpstream = performance.now();
        let out: TapBytes | null;
        try {
          out = cur.tap.push(r.value!);
        } catch (e) {
          // An error event from the upstream (translation path) or an undecodable stream.
          if (await onBreak(c, sendEarlierOutput(c, e))) continue;
          return;
        }
        if (out && out.length) {
          if (cur.attempt.ttfbMs === null) cur.attempt.markFirstByte();
          enqueueAll(c, out);
          wrote = true;
          return;
        }
      }
    } catch (e) {
      onRelayBug(c, e);
    }
  }
}
