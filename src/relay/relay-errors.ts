// The relay's own errors (SPEC Errors), with messages that say what to do next. Upstream text
// shown to clients passes through scrub() first: provider keys, bearer tokens and long opaque
// strings never leave in a message.
import { GatewayError } from "../errors.ts";

const KEYISH = /\b(?:sk|rk|gw|pk|gsk|csk|xai|sess|key)[-_][A-Za-z0-9*._-]{6,}/gi;
const BEARER = /\bBearer\s+[^\s"',;]+/gi;
const GOOGLE_KEY = /\bAIza[0-9A-Za-z_-]{10,}/g;
const OPAQUE = /\b[A-Za-z0-9_-]{40,}\b/g;

export function scrub(message: string): string {
  return message
    .replace(BEARER, "Bearer [redacted]")
    .replace(KEYISH, "[redacted]")
    .replace(GOOGLE_KEY, "[redacted]")
    .replace(OPAQUE, "[redacted]")
    .slice(0, 600);
}

export const noProviders = () =>
  new GatewayError(400, "This routing key has no provider lanes yet. Add lanes with PATCH /v1/organizations/routing-keys?id=<key id> (`providers`), then retry.", { code: "no_providers" });

export const noCredential = (provider: string, laneIndex: number) =>
  new GatewayError(400, `Lane ${laneIndex + 1} (${provider}) has no saved API key: it was deleted. Save one with POST /v1/organizations/credentials and rewire the key's lanes, then retry.`, { code: "no_credential" });

export const budgetExceeded = (budgetUsd: number, month: string) =>
  new GatewayError(402, `This routing key's monthly budget of $${budgetUsd} for ${month} is used up. Raise monthly_budget_usd with PATCH /v1/organizations/routing-keys, or wait for next month.`, { code: "budget_exceeded" });

export interface LaneFailure {
  provider: string;
  laneIndex: number;
  /** Upstream HTTP status, 0 for a connection failure or a lane that could not be tried. */
  status: number;
  code: string;
  message: string;
}

export function allLanesFailed(tried: number, last: LaneFailure | null): GatewayError {
  const detail = last ? ` Last error (lane ${last.laneIndex + 1}, ${last.provider}${last.status ? `, HTTP ${last.status}` : ""}): ${scrub(last.message)}` : "";
  return new GatewayError(502, `Every provider lane failed (${tried} tried).${detail} Retry later or add a fallback lane to the key.`, { code: "upstream_error" });
}

/** An upstream 4xx about the request itself, returned to the client as the upstream meant it. */
export function upstreamRejected(provider: string, status: number, message: string, code: string | undefined): GatewayError {
  return new GatewayError(status, `The upstream (${provider}) rejected the request: ${scrub(message)}`, {
    code: code ?? "upstream_rejected",
    type: "invalid_request_error",
  });
}
