// The relay's own errors (SPEC Errors), with messages that say what to do next. Upstream text
// shown to clients passes through scrub() first: provider keys, bearer tokens and long opaque
// strings never leave in a message.
import { GatewayError } from "../errors.ts";
import { VENDOR_SECRET_PATTERNS } from "../providers/endpoints.ts";

const BEARER = /\bBearer\s+[^\s"',;]+/gi;
const OPAQUE = /\b[A-Za-z0-9_-]{40,}\b/g;

export function scrub(message: string): string {
  let out = message.replace(BEARER, "Bearer [redacted]");
  for (const p of VENDOR_SECRET_PATTERNS) out = out.replace(p, "[redacted]");
  return out.replace(OPAQUE, "[redacted]").slice(0, 600);
}

export const noProviders = () =>
  new GatewayError(400, "This routing key has no provider lanes yet. Add lanes with PATCH /v1/organizations/routing-keys?id=<key id> (`providers`), then retry.", { code: "no_providers" });

export const noCredential = (provider: string, laneIndex: number) =>
  new GatewayError(400, `Lane ${laneIndex + 1} (${provider}) has no saved API key: it was deleted. Save one with POST /v1/organizations/credentials and rewire the key's lanes, then retry.`, { code: "no_credential" });

/** Dollars with the digits that matter: $12.50, $0.0009, $0.000001 (never $0.0000 for a nonzero amount). */
export function usd(x: number): string {
  if (x === 0) return "$0";
  if (Math.abs(x) >= 1) return `$${x.toFixed(2)}`;
  const decimals = Math.min(12, 1 - Math.floor(Math.log10(Math.abs(x))));
  return `$${x.toFixed(decimals).replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "")}`;
}

export interface BudgetRefusalFacts {
  budgetUsd: number;
  month: string;
  keyId: string;
  /** The month's spend with requests in flight; null when the counter could not be read. */
  spentUsd: number | null;
  /** The request's smallest possible cost (prompt and a useful answer on the dearest lane). */
  minUsd: number | null;
}

/** 402 that says the truth (used up, or one request's cost does not fit) and names the exact request that raises the budget. */
export function budgetExceeded(f: BudgetRefusalFacts): GatewayError {
  const left = f.spentUsd === null ? null : Math.max(0, f.budgetUsd - f.spentUsd);
  const usedUp = left !== null && (left === 0 || f.minUsd === null);
  const raiseTo = Math.max(1, Math.ceil(Math.max(f.budgetUsd * 2, (f.spentUsd ?? 0) + (f.minUsd ?? 0) * 10)));
  const why = usedUp
    ? `This routing key's monthly budget of ${usd(f.budgetUsd)} for ${f.month} is used up (${usd(f.spentUsd!)} spent or held by requests in flight).`
    : `This request does not fit this routing key's monthly budget of ${usd(f.budgetUsd)} for ${f.month}: its smallest possible cost${f.minUsd === null ? "" : `, ${usd(f.minUsd)} (the prompt and a short answer at the dearest lane's prices),`} is more than the ${left === null ? "budget left" : `${usd(left)} left`}${f.spentUsd === null ? "" : ` (${usd(f.spentUsd)} spent or held by requests in flight)`}.`;
  return new GatewayError(402, `${why} Raise it with PATCH /v1/organizations/routing-keys?id=${f.keyId} and a body like {"monthly_budget_usd": ${raiseTo}} (an account token's request)${usedUp ? ", or wait for next month" : ""}.`, { code: "budget_exceeded" });
}

/** What to do when a vendor refused the saved provider key of a lane (upstream 401/403). */
export const credentialRefusedHint = (provider: string, laneIndex: number, keyId: string) =>
  `The saved ${provider} API key of lane ${laneIndex + 1} was refused by ${provider} (wrong, revoked or without access). Save a working key with POST /v1/organizations/credentials {"provider": "${provider}", "api_key": "…"}, then point the lane at it with PATCH /v1/organizations/routing-keys?id=${keyId} (\`providers[${laneIndex}].credential_id\`).`;

export interface LaneFailure {
  provider: string;
  laneIndex: number;
  /** Upstream HTTP status, 0 for a connection failure or a lane that could not be tried. */
  status: number;
  code: string;
  message: string;
  /**
   * The client's error when the lane refused the request for a reason the client must fix
   * (400 unsupported_feature, 404 model_not_found): the answer when every lane refused so.
   */
  error?: GatewayError;
  /** What the operator should do about this failure (a refused saved key): set only on those. */
  hint?: string;
  /** The upstream's Retry-After, in ms: it sets the lane's cooldown (routing/cooldowns.ts). */
  retryAfterMs?: number | null;
}

/** `hint`: what to do about a failure the caller can fix (from any lane), instead of "retry later". */
export function allLanesFailed(tried: number, last: LaneFailure | null, hint?: string): GatewayError {
  const said = last ? scrub(last.message) : "";
  // Upstream and stream failures read as clauses ("the connection closed early"): end the sentence.
  const detail = last ? ` Last error (lane ${last.laneIndex + 1}, ${last.provider}${last.status ? `, HTTP ${last.status}` : ""}): ${said}${/[.!?]$/.test(said) ? "" : "."}` : "";
  const todo = hint ?? last?.hint ?? "Retry later or add a fallback lane to the key.";
  return new GatewayError(502, `Every provider lane failed (${tried} tried).${detail} ${todo}`, { code: "upstream_error" });
}

/**
 * CONTRACT §8: the vendor refused the saved key of every lane that did not refuse the request
 * itself. 502, but `x-should-retry: false`: the official SDKs would otherwise retry a 5xx,
 * and no retry helps until the operator saves a working key.
 */
export function upstreamAuthFailed(failures: LaneFailure[]): GatewayError {
  const auth = failures.filter((f) => f.hint);
  const lanes = auth.map((f) => `lane ${f.laneIndex + 1} (${f.provider}, HTTP ${f.status})`).join(", ");
  const what = [...new Set(auth.map((f) => f.hint!))].join(" ");
  return new GatewayError(502, `No lane could serve: the vendor refused the saved API key of ${lanes}. ${what}`, {
    code: "upstream_auth_failed",
    headers: { "x-should-retry": "false" },
  });
}

/**
 * CONTRACT §8: the upstream does not know the requested model (after the lane's own retry of
 * fallback_to_default_model). OpenAI answers 404 `model_not_found`, param null; the client
 * gets that in its own protocol when every lane said so.
 */
export function modelNotFound(provider: string, laneIndex: number, model: string, message: string): GatewayError {
  return new GatewayError(404, `The model \`${model}\` does not exist or is not available on this routing key (lane ${laneIndex + 1}, ${provider}: ${scrub(message)}). Check the model name; GET /v1/models lists the models this key can use.`, {
    code: "model_not_found",
    type: "invalid_request_error",
  });
}

/** An upstream 4xx about the request itself, returned to the client as the upstream meant it. */
export function upstreamRejected(provider: string, status: number, message: string, code: string | undefined, param?: string): GatewayError {
  return new GatewayError(status, `The upstream (${provider}) rejected the request: ${scrub(message)}`, {
    code: code ?? "upstream_rejected",
    type: "invalid_request_error",
    param,
  });
}
