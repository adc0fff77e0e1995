// Gemini error answers → routing meaning.
// Body shape: {"error": {"code": 429, "message": "…", "status": "RESOURCE_EXHAUSTED", "details": [...]}}
import { jsonOrNull, retryableStatus } from "../pivot.ts";
import type { Json, UpstreamErrorInfo } from "../types.ts";

const RETRYABLE_STATUSES = new Set(["RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED", "UNAUTHENTICATED", "PERMISSION_DENIED", "ABORTED"]);

export function geminiErrorRetryable(code: number, status: string): boolean {
  return retryableStatus(code) || RETRYABLE_STATUSES.has(status);
}

/** Gemini answers a bad API key with 400 INVALID_ARGUMENT; that is this lane's key, not the request. */
function badKey(e: Json | null): boolean {
  if (!e) return false;
  if (Array.isArray(e.details) && e.details.some((d: Json) => d?.reason === "API_KEY_INVALID")) return true;
  return typeof e.message === "string" && /API key not valid/i.test(e.message);
}

export function geminiErrorOf(status: number, bodyText: string): UpstreamErrorInfo {
  // Errors arrive as an object, or (from the streaming endpoint) as a one-element array.
  let body = jsonOrNull(bodyText);
  if (Array.isArray(body)) body = body[0] ?? null;
  const e: Json | null = body?.error && typeof body.error === "object" ? body.error : null;
  const grpc = typeof e?.status === "string" ? e.status : "";
  const detail = typeof e?.message === "string" ? e.message : bodyText.slice(0, 300);
  const modelNotFound = (status === 404 || grpc === "NOT_FOUND") && /model/i.test(detail);
  const out: UpstreamErrorInfo = {
    message: `Gemini answered ${status}${grpc ? ` ${grpc}` : ""}: ${detail || "no details"}`,
    retryable: !modelNotFound && (geminiErrorRetryable(status, grpc) || badKey(e)),
    modelNotFound,
  };
  if (grpc) out.code = grpc;
  return out;
}
