// OpenAI-style error answers of a Responses upstream → routing meaning.
// Body shape: {"error": {"message", "type", "code", "param"}}; some backends answer {"detail": "…"}.
import { jsonOrNull, retryableStatus } from "../pivot.ts";
import type { UpstreamErrorInfo } from "../types.ts";

const RETRYABLE_CODES = new Set(["server_error", "rate_limit_exceeded", "rate_limit_error", "insufficient_quota", "server_is_overloaded", "slow_down", "internal_error"]);

export function responsesErrorRetryable(code: string): boolean {
  return RETRYABLE_CODES.has(code);
}

const MODEL_UNKNOWN = /model.*(not (found|supported|exist)|unsupported|does not exist|unknown)|(unknown|unsupported|invalid) model/i;

export function responsesErrorOf(status: number, bodyText: string): UpstreamErrorInfo {
  const body = jsonOrNull(bodyText);
  const e = body?.error && typeof body.error === "object" ? body.error : null;
  const code = typeof e?.code === "string" ? e.code : typeof e?.type === "string" ? e.type : "";
  const detail = typeof e?.message === "string" ? e.message : typeof body?.detail === "string" ? body.detail : bodyText.slice(0, 300);
  const modelNotFound = code === "model_not_found" || ((status === 400 || status === 404) && MODEL_UNKNOWN.test(detail));
  const out: UpstreamErrorInfo = {
    message: `The upstream answered ${status}${code ? ` ${code}` : ""}: ${detail || "no details"}`,
    retryable: !modelNotFound && (retryableStatus(status) || responsesErrorRetryable(code)),
    modelNotFound,
  };
  if (code) out.code = code;
  if (typeof e?.param === "string") out.param = e.param;
  return out;
}
