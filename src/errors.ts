// Errors are typed values. Only this module turns them into response bodies, in the
// documented shapes: nested `{error: {message, type, param, code}}` on inference endpoints (both
// `param` and `code` always present, null when empty, as OpenAI sends them: CONTRACT §8),
// flat `{error, code}` on management endpoints and /blitz, Anthropic's
// `{type: "error", error: {type, message}}` on /v1/messages, and Google's
// `{error: {code, message, status}}` on the Gemini-native /v1beta routes (CONTRACT §9).

export type ErrorShape = "nested" | "flat" | "anthropic" | "google";

export interface GatewayErrorInit {
  /** Machine-readable code from the spec's Errors table; omitted where the spec gives none. */
  code?: string;
  /** Extra top-level fields (e.g. `payment` on 402 payment_required). */
  extra?: Record<string, unknown>;
  /** Nested shape `type`; defaults by status. */
  type?: string;
  /** Nested shape `param`: the request parameter the error is about (null when none). */
  param?: string | null;
  /** True when a later lane may succeed where this one failed. */
  retryable?: boolean;
  headers?: Record<string, string>;
}

export class GatewayError extends Error {
  override name = "GatewayError";
  readonly status: number;
  readonly code?: string;
  readonly extra?: Record<string, unknown>;
  readonly type?: string;
  readonly param?: string | null;
  readonly retryable: boolean;
  readonly headers?: Record<string, string>;

  constructor(status: number, message: string, init: GatewayErrorInit = {}) {
    super(message);
    this.status = status;
    this.code = init.code;
    this.extra = init.extra;
    this.type = init.type;
    this.param = init.param;
    this.retryable = init.retryable ?? false;
    this.headers = init.headers;
  }
}

const typeByStatus: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "insufficient_quota",
  403: "permission_error",
  404: "not_found_error",
  405: "invalid_request_error",
  410: "invalid_request_error",
  413: "invalid_request_error",
  429: "rate_limit_error",
};

/** Anthropic's error types by status, so its SDK raises the matching typed error. */
const anthropicTypeByStatus: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  405: "invalid_request_error",
  410: "authentication_error",
  413: "request_too_large",
  429: "rate_limit_error",
  503: "overloaded_error",
  504: "timeout_error",
  529: "overloaded_error",
};

/** The Anthropic error type of a gateway error (api_error for every other 5xx). */
export function anthropicErrorType(status: number): string {
  return anthropicTypeByStatus[status] ?? (status >= 500 ? "api_error" : "invalid_request_error");
}

/**
 * Google's canonical status names by HTTP status (google.rpc.Code), so Google's SDKs raise the
 * matching error. Statuses Google never answers keep their own number (402 budget) and take the
 * nearest name; the message says what happened.
 */
const googleStatusByHttp: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  402: "RESOURCE_EXHAUSTED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  405: "UNIMPLEMENTED",
  409: "ABORTED",
  410: "UNAUTHENTICATED",
  413: "INVALID_ARGUMENT",
  429: "RESOURCE_EXHAUSTED",
  499: "CANCELLED",
  500: "INTERNAL",
  501: "UNIMPLEMENTED",
  502: "UNAVAILABLE",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

/** The google.rpc status name of a gateway error's HTTP status. */
export function googleStatus(status: number): string {
  return googleStatusByHttp[status] ?? (status >= 500 ? "INTERNAL" : "FAILED_PRECONDITION");
}

/** Statuses whose gateway meaning a Google client cannot read off the status name alone (a budget is not a quota). */
const SAYS_ITS_CODE = new Set([401, 402, 403, 410, 429]);

/**
 * Google's error object. The gateway's own code (budget_exceeded, rate_limit_exceeded,
 * invalid_api_key…) leads the message of a key, budget or rate-limit error (CONTRACT §9: they
 * keep their status and say so in `message`) and goes in an ErrorInfo detail as its `reason`,
 * where Google's clients look for one.
 */
export function googleErrorObject(err: GatewayError): { code: number; message: string; status: string; details?: unknown[] } {
  const message = err.code && SAYS_ITS_CODE.has(err.status) ? `${err.code}: ${err.message}` : err.message;
  const out: { code: number; message: string; status: string; details?: unknown[] } = { code: err.status, message, status: googleStatus(err.status) };
  if (err.code) out.details = [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: err.code, domain: "gateway" }];
  return out;
}

/** The nested (OpenAI) error object: message, type, param and code, the last two null when empty. */
export function nestedErrorObject(err: GatewayError): { message: string; type: string; param: string | null; code: string | null } {
  return {
    message: err.message,
    type: err.type ?? typeByStatus[err.status] ?? (err.status >= 500 ? "server_error" : "invalid_request_error"),
    param: err.param ?? null,
    code: err.code ?? null,
  };
}

export function errorBody(err: GatewayError, shape: ErrorShape): Record<string, unknown> {
  if (shape === "anthropic") return { type: "error", error: { type: anthropicErrorType(err.status), message: err.message } };
  if (shape === "google") return { error: googleErrorObject(err) };
  if (shape === "nested") {
    return { error: nestedErrorObject(err), ...err.extra };
  }
  const body: Record<string, unknown> = { error: err.message };
  if (err.code !== undefined) body.code = err.code;
  return { ...body, ...err.extra };
}

export function errorResponse(err: GatewayError, shape: ErrorShape): Response {
  return new Response(JSON.stringify(errorBody(err, shape)), {
    status: err.status,
    headers: { "content-type": "application/json", ...err.headers },
  });
}

/** Anything thrown that is not a GatewayError is a crash: 500 `unhandled`, details only in logs. */
export function asGatewayError(e: unknown): GatewayError {
  if (e instanceof GatewayError) return e;
  if (isDatabaseError(e)) return serverError();
  return new GatewayError(500, "The gateway hit an unexpected error. Retry the request; if it persists, report it with the x-request-id header value.", { code: "unhandled" });
}

// Constructors for the codes that recur. Messages say what to do next.
export const badRequest = (message: string, extra?: Record<string, unknown>) =>
  new GatewayError(400, message, { code: "bad_request", extra });
export const unsupportedFeature = (message: string, param?: string) =>
  new GatewayError(400, message, { code: "unsupported_feature", param });
export const serverError = (message = "A database operation failed. Retry the request in a moment.") =>
  new GatewayError(500, message, { code: "server_error" });
export const envMissing = (variable: string) =>
  new GatewayError(500, `The gateway is misconfigured: ${variable} is not set. The operator must set it and restart.`, { code: "env_missing" });
export const methodNotAllowed = (allowed: string[], withCode: boolean) =>
  new GatewayError(405, `Method not allowed. Use ${allowed.join(" or ")}.`, {
    code: withCode ? "method_not_allowed" : undefined,
    headers: { allow: allowed.join(", ") },
  });

/**
 * CONTRACT §9: a WebSocket upgrade (Codex's Responses WebSocket mode) is answered at once with 426,
 * the status its client falls back to HTTP on, instead of a 405 it retries.
 */
export const websocketNotServed = (allowed: string[]) =>
  new GatewayError(426, `WebSocket transport is not served on this path; send the request over HTTP (${allowed.join(" or ")}, with "stream": true to stream).`, {
    code: "websocket_not_supported",
    headers: { connection: "close" },
  });

/** Errors raised by postgres.js, PGlite or drizzle's query wrapper. */
const DATABASE_ERROR_NAMES = new Set(["DrizzleQueryError", "PostgresError", "DatabaseError"]);
/** postgres.js's own connection failures (a socket error such as ECONNREFUSED arrives wrapped in DrizzleQueryError). */
const DATABASE_CONNECTION_CODES = new Set(["CONNECT_TIMEOUT", "CONNECTION_CLOSED", "CONNECTION_ENDED", "CONNECTION_DESTROYED"]);

/** A failure to reach Postgres (timed out, refused, dropped), as opposed to an error Postgres answered. */
export function isDatabaseConnectionError(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  const code = String((e as { code?: unknown }).code);
  if (DATABASE_CONNECTION_CODES.has(code) || code === "ECONNREFUSED" || code === "ECONNRESET") return true;
  return e.cause instanceof Error && isDatabaseConnectionError(e.cause);
}

export function isDatabaseError(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  // drizzle's DrizzleQueryError keeps name "Error": the class name is what identifies it.
  if (DATABASE_ERROR_NAMES.has(e.name) || DATABASE_ERROR_NAMES.has(e.constructor?.name)) return true;
  if (DATABASE_CONNECTION_CODES.has(String((e as { code?: unknown }).code))) return true;
  return e.cause instanceof Error && isDatabaseError(e.cause);
}

/**
 * A thrown value as a log field with no secret in it: drizzle puts the query's parameters
 * (which can be tokens or ciphertexts) into its message after "params:", so that part is cut.
 */
export function loggableError(e: unknown): Record<string, unknown> {
  if (!(e instanceof Error)) return { message: String(e).slice(0, 200) };
  const clean = (m: string) => m.split(/\n?params:/)[0]!.slice(0, 500);
  const out: Record<string, unknown> = { name: e.name, message: clean(e.message) };
  if (e.cause instanceof Error) out.cause = { name: e.cause.name, message: clean(e.cause.message), code: (e.cause as { code?: unknown }).code };
  if (!isDatabaseError(e)) out.stack = e.stack?.split("\n").slice(0, 8).join("\n");
  return out;
}
