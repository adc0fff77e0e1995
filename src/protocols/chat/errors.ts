// OpenAI-protocol error answers → routing meaning (CONTRACT §3). Used by `openai` and every
// OpenAI-compatible vendor. Body shape: {"error": {"message", "type", "param", "code"}}; some
// compatible vendors send {"error": "text"} or {"message": …}, which read the same way.
import { jsonOrNull, retryableStatus } from "../pivot.ts";
import type { Json, UpstreamErrorInfo } from "../types.ts";

const MODEL_NOT_FOUND_CODES = new Set(["model_not_found", "model_not_available"]);

export function chatErrorOf(status: number, bodyText: string): UpstreamErrorInfo {
  const body = jsonOrNull(bodyText);
  const e: Json | null = body && typeof body.error === "object" && body.error !== null ? body.error : null;
  const message =
    (typeof e?.message === "string" && e.message) ||
    (typeof body?.error === "string" && body.error) ||
    (typeof body?.message === "string" && body.message) ||
    bodyText.slice(0, 300).trim() ||
    "no details";
  const code = typeof e?.code === "string" ? e.code : undefined;
  // OpenAI answers an unknown model with 404 model_not_found ("The model `x` does not exist or you
  // do not have access to it."); compatible vendors use 400/404 with similar words.
  const modelNotFound =
    (code !== undefined && MODEL_NOT_FOUND_CODES.has(code)) ||
    ((status === 404 || status === 400) && /\bmodel\b/i.test(message) && /does not exist|not found|unknown|not supported|invalid model/i.test(message));
  const out: UpstreamErrorInfo = { message, retryable: !modelNotFound && retryableStatus(status), modelNotFound };
  if (code !== undefined) out.code = code;
  if (typeof e?.param === "string") out.param = e.param;
  return out;
}
