// Small request helpers shared by every route: the bearer token, the client IP, the query.
// Bodies are read by body.ts.
import { badRequest } from "../errors.ts";

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
