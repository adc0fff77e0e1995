// Anthropic error answers → routing meaning.
// Body shape: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}, "request_id": …}
import { jsonOrNull, retryableStatus } from "../pivot.ts";
import type { UpstreamErrorInfo } from "../types.ts";

const RETRYABLE_TYPES = new Set(["overloaded_error", "api_error", "rate_limit_error", "timeout_error", "authentication_error", "permission_error", "billing_error"]);

/** Whether an Anthropic error type means another lane may succeed (capacity, outage, this lane's key). */
export function anthropicErrorRetryable(type: string): boolean {
  return RETRYABLE_TYPES.has(type);
}

export function anthropicErrorOf(status: number, bodyText: string): UpstreamErrorInfo {
  const body = jsonOrNull(bodyText);
  const e = body?.error && typeof body.error === "object" ? body.error : null;
  const type = typeof e?.type === "string" ? e.type : "";
  const detail = typeof e?.message === "string" ? e.message : bodyText.slice(0, 300);
  // An unknown model is 404 not_found_error "model: <name>".
  const modelNotFound = type === "not_found_error" && /\bmodel\b/i.test(detail);
  const out: UpstreamErrorInfo = {
    message: `Anthropic answered ${status}${type ? ` ${type}` : ""}: ${detail || "no details"}`,
    retryable: !modelNotFound && (retryableStatus(status) || anthropicErrorRetryable(type)),
    modelNotFound,
  };
  if (type) out.code = type;
  return out;
}
