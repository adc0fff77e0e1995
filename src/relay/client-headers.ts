// Headers of the client's own protocol that a lane speaking the same protocol receives as sent
// (ClientCodec.forwardHeaders: anthropic-version and anthropic-beta for Messages clients).
import { clientCodecs } from "../protocols/index.ts";
import type { ClientShape } from "../protocols/types.ts";

/** The client's protocol headers present on the request (lower-case names), or undefined. */
export function forwardedHeaders(shape: ClientShape, request: Request): Record<string, string> | undefined {
  const names = clientCodecs[shape]?.forwardHeaders;
  if (!names) return undefined;
  let out: Record<string, string> | undefined;
  for (const n of names) {
    const v = request.headers.get(n);
    if (v) (out ??= {})[n] = v;
  }
  return out;
}
