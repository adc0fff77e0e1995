// Fixtures for relay tests: saved credentials and routing keys inserted directly (their
// management endpoints have their own tests), encrypted and hashed exactly as management does.
import { eq } from "drizzle-orm";
import type { Gateway } from "../../src/gateway.ts";
import { routingKeys } from "../../src/store/db/schema/index.ts";
import { publishInvalidation } from "../../src/store/invalidation.ts";
import { addCredential, addRoutingKey, lane, startRelayWorld, type KeyOptions } from "../helpers/relay-world.ts";

export { addCredential, addRoutingKey, lane, type KeyOptions };

/** Revokes a key the way management does: row update, then the invalidation message. */
export async function revokeKey(gw: Gateway, key: { id: string; hash: string }) {
  await gw.ctx.db.update(routingKeys).set({ revokedAt: new Date() }).where(eq(routingKeys.id, key.id));
  await publishInvalidation(gw.ctx, { kind: "key", hash: key.hash });
}

/** A body's size as the gateway reads it (what its reservation is estimated from). */
export const bytesOf = (body: unknown) => Buffer.byteLength(JSON.stringify(body));

export const chatBody = (extra: Record<string, unknown> = {}) => ({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "Say hello." }],
  ...extra,
});

/** Reads an SSE response fully as text. */
export async function readText(res: Response): Promise<string> {
  return await res.text();
}

/** data: payloads of an SSE text (comments and blank lines dropped). */
export function dataLines(sse: string): string[] {
  return sse.split(/\r\n|\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim());
}

/** Two mock upstreams, a gateway whose openai lanes go to A and groq lanes to B, an account, and a saved key for each. */
export async function startOpenAIGroqWorld() {
  const w = await startRelayWorld({ providers: ["openai", "groq"] });
  return { gw: w.gw, A: w.up.openai, B: w.up.groq, acct: w.acct, credA: w.cred.openai, credB: w.cred.groq, stop: w.stop };
}
