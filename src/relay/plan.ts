// What one lane is asked to do (attempt.ts): the operation, the protocol spoken, the codecs that
// read the answer, and the body sent. Pass-through, translation through the pivot, a direct codec
// (embeddings), an upload as it came, or a token count.
import { AdaptLog } from "../protocols/adapt.ts";
import { clientCodecs, directCodecs, upstreamCodecs } from "../protocols/index.ts";
import type { ChatRequest, ClientCodec, ClientShape, DirectCodec, Json, UpstreamCodec, WireProtocol } from "../protocols/types.ts";
import { builtFrom } from "../protocols/wire-json.ts";
import type { ProviderAdapter } from "../providers/types.ts";
import type { RelayRequest } from "./relay-request.ts";

export interface Plan {
  /** The operation: a body for the lane's protocol, the client's upload as it came, or a token count of the body. */
  kind: "inference" | "upload" | "count";
  protocol: WireProtocol;
  codec: Pick<UpstreamCodec, "errorOf"> & Partial<UpstreamCodec>;
  /** Set on the translation path (the client's shape is not a protocol the lane speaks). */
  client: ClientCodec | null;
  /** Set for shapes served without the pivot (embeddings). */
  direct: DirectCodec | null;
  body: Json;
  /** The fields this lane's body adapted (CONTRACT §9: `field=action, …`), null when none. */
  adapted: string | null;
}

/** The request's pivot, made once under the key's translation policy (CONTRACT §9: absent means adapt). */
export function pivotOf(rr: RelayRequest, client: ClientCodec): ChatRequest {
  if (rr.pivot) return rr.pivot;
  const log = new AdaptLog(rr.key.translation ?? "adapt", client.fieldNames);
  rr.pivot = client.toPivot(rr.body, log);
  rr.pivotLog = log;
  return rr.pivot;
}

/** Whether a lane of this adapter can serve the shape at all (shapes served without the pivot need a protocol that has them). */
export function servesShape(adapter: ProviderAdapter, shape: ClientShape): boolean {
  const direct = directCodecs[shape];
  return !direct || adapter.protocols.some((p) => direct[p]);
}

/**
 * Pass-through when the lane speaks the client's shape natively, else client → pivot → lane protocol.
 * A string: why this lane cannot serve the request (it fails over). null: a count on a lane whose
 * vendor cannot count (the caller answers its estimate).
 */
export function planBody(rr: RelayRequest, adapter: ProviderAdapter, model: string): Plan | string | null {
  if (rr.count) {
    // A vendor counts requests of its own protocol only (Anthropic a Messages body, Google a Gemini one).
    const protocol = rr.shape as WireProtocol;
    if (!adapter.countTokens || !adapter.protocols.includes(protocol)) return null;
    const codec = upstreamCodecs[protocol]!;
    if (protocol !== "anthropic" || !codec.passThroughRequest) {
      // The client's body, as it came, with the lane's model; answers and errors in the client's protocol.
      const body = model === rr.body.model ? rr.body : { ...rr.body, model };
      return { kind: "count", protocol, codec: { errorOf: codec.errorOf }, client: null, direct: null, body, adapted: null };
    }
    // A Messages body with the lane's model (and under adapt its system turns moved, as for the
    // answer itself); answers and errors in Anthropic's shape.
    const log = rr.key.translation === "strict" ? undefined : new AdaptLog("adapt");
    const body = codec.passThroughRequest(rr.body, { model, stream: false, adapt: log });
    return { kind: "count", protocol, codec: { errorOf: codec.errorOf }, client: null, direct: null, body, adapted: log ? log.summary() : null };
  }
  if (rr.upload) {
    if (!adapter.transcribe) return `${adapter.id} lanes cannot transcribe audio.`;
    // Upload answers are OpenAI-shaped errors whatever the vendor: the chat protocol's reader.
    return { kind: "upload", protocol: "chat", codec: { errorOf: upstreamCodecs.chat!.errorOf }, client: null, direct: null, body: {}, adapted: null };
  }
  const directs = directCodecs[rr.shape];
  if (directs) {
    const protocol = adapter.protocols.find((p) => directs[p]);
    if (!protocol) return `${adapter.id} lanes cannot serve ${rr.shape} requests.`;
    const direct = directs[protocol]!;
    return { kind: "inference", protocol, codec: { errorOf: direct.errorOf }, client: null, direct, body: direct.encodeRequest(rr.body, { model }), adapted: null };
  }
  const native = adapter.protocols.includes(rr.shape) ? upstreamCodecs[rr.shape] : undefined;
  if (native?.passThroughRequest) {
    // Under strict nothing is adapted on the way through; under adapt the codec may (a Messages
    // body's system turns), and says so. The log costs one small object; nothing is parsed again.
    const log = rr.key.translation === "strict" ? undefined : new AdaptLog("adapt");
    const body = native.passThroughRequest(rr.body, { model, stream: rr.stream, adapt: log });
    builtFrom(body, rr.body);
    return { kind: "inference", protocol: rr.shape as WireProtocol, codec: native, client: null, direct: null, body, adapted: log ? log.summary() : null };
  }
  const protocol = adapter.protocols[0]!;
  const codec = upstreamCodecs[protocol];
  const client = clientCodecs[rr.shape];
  if (!codec || !client) {
    return `Requests in the ${rr.shape} shape are not supported yet on ${adapter.id} lanes (no ${rr.shape} → ${protocol} translation is installed).`;
  }
  const pivot = pivotOf(rr, client);
  const log = rr.pivotLog ? rr.pivotLog.fork() : new AdaptLog(rr.key.translation ?? "adapt", client.fieldNames);
  const body = codec.encodeRequest(pivot, { model, stream: rr.stream, adapt: log, hints: adapter.modelHints?.(model) });
  return { kind: "inference", protocol, codec, client, direct: null, body, adapted: log.summary() };
}
