// Small request helpers shared by every route: the bearer token, the client IP, JSON bodies.
import { badRequest, GatewayError } from "../errors.ts";

/** `Authorization: <token>` with or without `Bearer `. Empty → null. */
export function bearer(request: Request): string | null {
  const h = request.headers.get("authorization");
  if (!h) return null;
  let t = h.trim();
  if (t.length >= 7 && t.slice(0, 7).toLowerCase() === "bearer ") t = t.slice(7).trim();
  // `Authorization: Bearer ` with nothing (or only spaces) after it arrives trimmed as `Bearer`:
  // that is no key at all, not an unknown one (CONTRACT §8).
  return t === "" || t.toLowerCase() === "bearer" ? null : t;
}

/**
 * The client's IP. With TRUST_PROXY = n, the n-th address from the right of X-Forwarded-For is
 * believed (each trusted proxy appends the address it saw); otherwise the socket address.
 */
export function clientIp(request: Request, socketIp: string | undefined, trustProxy: number): string {
  if (trustProxy > 0) {
    const xff = request.headers.get("x-forwarded-for");
    if (xff) {
      const parts = xff.split(",").map((s) => s.trim()).filter(Boolean);
      const picked = parts[Math.max(0, parts.length - trustProxy)];
      if (picked) return picked;
    }
  }
  return socketIp ?? "unknown";
}

/** Reads a JSON object body of at most `maxBytes`, answering 413/400 in plain words. */
export async function readJsonObject(request: Request, maxBytes: number): Promise<Record<string, unknown>> {
  const len = Number(request.headers.get("content-length") ?? "0");
  if (len > maxBytes) throw tooLarge(maxBytes);
  const text = await request.text();
  if (text.length > maxBytes) throw tooLarge(maxBytes);
  if (text.trim() === "") throw badRequest("The request body is empty; send a JSON object.");
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw badRequest("The request body is not valid JSON; send a JSON object.");
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw badRequest("The request body must be a JSON object.");
  return v as Record<string, unknown>;
}

export function tooLarge(maxBytes: number): GatewayError {
  return new GatewayError(413, `The request body is larger than ${maxBytes} bytes; send a smaller request.`, { code: "request_too_large" });
}

/** Query parameters as a plain object; a repeated parameter is a 400. */
export function queryOf(request: Request): Record<string, string> {
  const url = new URL(request.url);
  const out: Record<string, string> = {};
  for (const [k, v] of url.searchParams) {
    if (k in out) throw badRequest(`Query parameter \`${k}\` was given more than once; send it once.`);
    out[k] = v;
  }
  return out;
}

/** Refuses query parameters outside `allowed` (mass-assignment and typo guard). */
export function onlyQuery(query: Record<string, string>, allowed: string[]): void {
  for (const k of Object.keys(query)) {
    if (!allowed.includes(k)) throw badRequest(`Unknown query parameter \`${k}\`.${allowed.length ? ` Allowed: ${allowed.join(", ")}.` : " This endpoint takes none."}`);
  }
}
