// The Responses shape, both ways:
// - responsesClientCodec: a /v1/responses client on a lane that speaks another protocol
//   (request → chat pivot; chat answer/stream → Response object / Responses events);
// - responsesUpstreamCodec: a lane that speaks only Responses (`sub`) serving a chat client
//   (chat pivot → Responses request; Response / events → chat).
import type { ClientCodec, Json, UpstreamCodec, Usage } from "../types.ts";
import { decodeResponsesResponse } from "./decode-response.ts";
import { encodeResponsesRequest } from "./encode-request.ts";
import { responsesErrorOf } from "./errors.ts";
import { responsesFromPivot } from "./from-pivot.ts";
import { responsesStreamDecoder } from "./stream-decoder.ts";
import { responsesStreamEncoder } from "./stream-encoder.ts";
import { responsesToPivot } from "./to-pivot.ts";
import { usageFromResponses } from "./usage.ts";

export { usageFromResponses, responsesUsage } from "./usage.ts";

export const responsesClientCodec: ClientCodec = {
  shape: "responses",
  toPivot: responsesToPivot,
  fromPivot: responsesFromPivot,
  streamEncoder: responsesStreamEncoder,
  fieldNames: { reasoning_effort: "reasoning.effort", verbosity: "text.verbosity", response_format: "text.format" },
};

/**
 * The Responses stream's last event: response.completed or .incomplete (a finished answer), or
 * response.failed / error (the upstream's own error, already in the client's hands).
 */
const RESPONSES_TERMINAL = /"type"\s*:\s*"(?:response\.completed|response\.incomplete|response\.failed|error)"/;

export const responsesUpstreamCodec: UpstreamCodec = {
  protocol: "responses",
  encodeRequest: encodeResponsesRequest,
  // A Responses client on a Responses lane: the body goes as it is, with the lane's model.
  // Responses streams always end with usage (response.completed), so nothing needs asking for.
  passThroughRequest: (body, opts) => ({ ...body, model: opts.model }),
  decodeResponse: (body, opts) => decodeResponsesResponse(body, opts),
  streamDecoder: responsesStreamDecoder,
  errorOf: responsesErrorOf,
  isTerminal: (data) => RESPONSES_TERMINAL.test(data),
  usageHolder: (event) => {
    const u = event.type === "response.completed" || event.type === "response.incomplete" ? event.response?.usage : null;
    return u && typeof u === "object" ? u : null;
  },
  usageOf(body: Json): Usage | null {
    // A Response object, or a response.completed / response.incomplete event ({response: {usage}}).
    return usageFromResponses(body?.usage ?? body?.response?.usage);
  },
};
