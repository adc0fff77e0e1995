// What clients see of the rate limits (CONTRACT §8): OpenAI's `x-ratelimit-*` headers on every
// inference response for the limits the key has, and over a limit a 429 `rate_limit_exceeded`
// whose Retry-After / retry-after-ms say the real wait, so the official SDKs back off on their own
// (they read retry-after-ms first and honour waits under 60 s; the window never asks for more).
import { GatewayError } from "../../errors.ts";
import type { KeyLimits, LimitVerdict } from "../../store/kv/limit-window.ts";

/** A duration as OpenAI writes its reset headers (Go's format): `20ms`, `1s`, `1.5s`, `6m0s`, `1h0m0s`. */
export function goDuration(ms: number): string {
  const t = Math.max(0, Math.round(ms));
  if (t === 0) return "0s";
  if (t < 1000) return `${t}ms`;
  const h = Math.floor(t / 3_600_000);
  const m = Math.floor((t % 3_600_000) / 60_000);
  const s = (t % 60_000) / 1000;
  const sec = `${Number.isInteger(s) ? s : s.toFixed(3).replace(/0+$/, "")}s`;
  return h ? `${h}h${m}m${sec}` : m ? `${m}m${sec}` : sec;
}

/** The `x-ratelimit-*` headers of the limits the key has (none for a key without rpm/tpm limits). */
export function rateHeaders(limits: KeyLimits, v: LimitVerdict): Record<string, string> {
  const h: Record<string, string> = {};
  if (limits.rpm !== null) {
    h["x-ratelimit-limit-requests"] = String(limits.rpm);
    h["x-ratelimit-remaining-requests"] = String(Math.max(0, v.remainingRequests));
    h["x-ratelimit-reset-requests"] = goDuration(v.resetRequestsMs);
  }
  if (limits.tpm !== null) {
    h["x-ratelimit-limit-tokens"] = String(limits.tpm);
    h["x-ratelimit-remaining-tokens"] = String(Math.max(0, v.remainingTokens));
    h["x-ratelimit-reset-tokens"] = goDuration(v.resetTokensMs);
  }
  return h;
}


/** 429 rate_limit_exceeded for a refused admission (nested type `requests` or `tokens`, as OpenAI sends). */
export function rateLimited(keyId: string, limits: KeyLimits, v: LimitVerdict): GatewayError {
  const RAISE = `or raise the limit with PATCH /v1/organizations/routing-keys?id=${keyId}`;
  const headers = rateHeaders(limits, v);
  const never = v.retryMs < 0;
  let message: string;
  if (v.refused === "tokens") {
    message = never
      ? `This request needs more tokens than this routing key's tpm_limit of ${limits.tpm} tokens per minute allows at once; send fewer prompts or a lower max_tokens, ${RAISE}.`
      : `Rate limit reached for tokens per minute (TPM) on this routing key: limit ${limits.tpm}. Please try again in ${goDuration(v.retryMs)}, send a lower max_tokens, ${RAISE}.`;
  } else if (v.refused === "concurrency") {
    message = never
      ? `This batch needs more requests in flight than this routing key's max_concurrent_requests of ${limits.concurrency}; send fewer prompts, ${RAISE}.`
      : `This routing key already has max_concurrent_requests (${limits.concurrency}) requests in flight. Retry when one finishes, ${RAISE}.`;
  } else {
    message = never
      ? `This batch is more requests than this routing key's rpm_limit of ${limits.rpm} per minute; send fewer prompts, ${RAISE}.`
      : `Rate limit reached for requests per minute (RPM) on this routing key: limit ${limits.rpm}. Please try again in ${goDuration(v.retryMs)}, ${RAISE}.`;
  }
  if (never) headers["x-should-retry"] = "false";
  else {
    // The official SDKs honour retry-after-ms only below 60 s and otherwise back off on their own
    // (sooner). A wait can pass 60 s only behind a slice taken ahead (≤ 61 s): say just under 60 s,
    // and the retry then learns the last moment exactly.
    const ms = Math.min(59_999, Math.max(1, Math.ceil(v.retryMs)));
    headers["retry-after"] = String(Math.ceil(ms / 1000));
    headers["retry-after-ms"] = String(ms);
  }
  return new GatewayError(429, message, { code: "rate_limit_exceeded", type: v.refused === "tokens" ? "tokens" : "requests", headers });
}

/** The 429 of every inference route, for the API reference. */
export const RATE_LIMITED_DOC = {
  "429": { description: "rate_limit_exceeded: over the key's rpm_limit, tpm_limit or max_concurrent_requests; `Retry-After` and `retry-after-ms` say when the request fits. Every answer carries OpenAI's `x-ratelimit-*` headers for the limits the key has." },
};
