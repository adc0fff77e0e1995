// The values a metric label can take. Nothing an upstream or a tenant sends becomes a label as it
// is: every value passes through one of these maps, so each label set is fixed by the code and
// the number of series stays bounded however many distinct error codes an upstream invents.
// docs/observability.md lists the sets; a new value the gateway itself records is added here.
import { getAdapter } from "../providers/registry.ts";

/** The value every unknown input maps to. */
export const OTHER = "other";

/** `endpoint`: the inference endpoints (relay/attempt.ts Endpoint, plus transcriptions). */
export const ENDPOINTS: ReadonlySet<string> = new Set(["chat", "responses", "messages", "embeddings", "blitz", "batch", "classifier", "transcriptions", "count_tokens", "generate_content"]);

/** `outcome` of a request or lane attempt. */
export const OUTCOMES: ReadonlySet<string> = new Set(["ok", "error", "broken", "aborted", "refused", "cache_hit"]);

/**
 * `code` / `reason`: the gateway's own error codes (SPEC Errors table) and the lane-failure codes
 * it records itself; `http_<status>` stands for an upstream failure without a code. Codes an
 * upstream puts in its error body are `other`: their status is in the `status` label.
 */
export const ERROR_CODES: ReadonlySet<string> = new Set([
  // SPEC Errors table
  "bad_request", "no_providers", "no_credential", "unsupported_feature", "signup_required", "invalid_api_key",
  "invalid_account_token", "auth_required", "budget_exceeded", "payment_required", "read_only_token",
  "method_not_allowed", "account_expired", "env_missing", "server_error", "encrypt_failed", "unhandled",
  "upstream_error", "request_too_large", "rate_limit_exceeded", "model_not_found", "not_found", "budget_unavailable",
  "upstream_auth_failed", "forbidden", "cancelled",
  // lane failures the relay records
  "timeout", "connection_failed", "unsupported_shape", "unsupported_provider", "bad_upstream_body", "empty_stream",
  "lane_unavailable", "lane_failed", "relay_failed", "client_closed", "stream_broken", "upstream_rejected",
]);

const HTTP_CODE = /^http_[1-5]\d\d$/;

/** An error code as a label: one of ERROR_CODES, `http_<100–599>`, or `other`. */
export function errorCodeLabel(code: string): string {
  return ERROR_CODES.has(code) || HTTP_CODE.test(code) ? code : OTHER;
}

/** An HTTP status as a label: `0` (no answer) or 100–599, else `other`. */
export function statusLabel(status: number): string {
  return status === 0 || (Number.isInteger(status) && status >= 100 && status <= 599) ? String(status) : OTHER;
}

export const endpointLabel = (endpoint: string): string => (ENDPOINTS.has(endpoint) ? endpoint : OTHER);

/** `outcome`: one of OUTCOMES or a gateway error code (a refusal), else `other`. */
export const outcomeLabel = (outcome: string): string => (OUTCOMES.has(outcome) || ERROR_CODES.has(outcome) ? outcome : OTHER);

/** `result` of session affinity (relay/routing/affinity.ts). */
export const AFFINITY_RESULTS: ReadonlySet<string> = new Set(["followed", "moved", "new"]);

export const affinityLabel = (result: string): string => (AFFINITY_RESULTS.has(result) ? result : OTHER);

/** `provider`: a registered adapter id or `none` (no provider reached), else `other`. */
export function providerLabel(provider: string): string {
  return provider === "none" || getAdapter(provider) !== undefined ? provider : OTHER;
}
