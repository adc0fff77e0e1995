// A sub lane that cannot serve this request: the relay moves to the next lane with this reason.
import { GatewayError } from "../../errors.ts";

export function laneFailure(message: string): GatewayError {
  return new GatewayError(502, message, { code: "upstream_error", retryable: true });
}
