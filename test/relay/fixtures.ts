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

/** An SSE text's events, each with its terminating blank line (LF or CRLF), in order. */
export const sseEventTexts = (sse: string): string[] => sse.split(/(?<=\n\r?\n)/).filter((e) => e !== "");

/** The usage object of a parsed event or answer (chat and Messages at the top, Responses inside `response`). */
const usageIn = (x: any): any => (x?.usage && typeof x.usage === "object" ? x.usage : x?.response?.usage);

/**
 * CONTRACT §9 on a pass-through stream: the client got the upstream's bytes, every event unchanged
 * except the one carrying the answer's usage, whose bytes are the upstream's with the gateway's
 * `cost` added at the end of its usage object. Returns that cost.
 */
export function expectPassThroughStream(got: string, upstream: string): number {
  const g = sseEventTexts(got);
  const u = sseEventTexts(upstream);
  if (g.length !== u.length) throw new Error(`the client got ${g.length} events, the upstream sent ${u.length}`);
  const costs: number[] = [];
  for (let i = 0; i < g.length; i++) {
    if (g[i] === u[i]) continue;
    const name = (e: string) => /(?:^|\n)event:[ ]?([^\r\n]*)/.exec(e)?.[1] ?? null;
    if (name(g[i]!) !== name(u[i]!)) throw new Error(`event ${i} changed its name: ${g[i]} vs ${u[i]}`);
    const gd = JSON.parse(dataLines(g[i]!).join("\n"));
    const ud = JSON.parse(dataLines(u[i]!).join("\n"));
    const usage = usageIn(gd);
    if (typeof usage?.cost !== "number") throw new Error(`event ${i} differs without carrying the gateway's cost: ${g[i]}`);
    costs.push(usage.cost);
    const member = `"cost":${JSON.stringify(usage.cost)}`;
    delete usage.cost;
    if (JSON.stringify(gd) !== JSON.stringify(ud)) throw new Error(`event ${i} differs beyond its cost: ${g[i]} vs ${u[i]}`);
    if (g[i]!.replace(`,${member}`, "").replace(member, "") !== u[i]) throw new Error(`event ${i} was rewritten, not given its cost in place: ${g[i]} vs ${u[i]}`);
  }
  if (costs.length !== 1) throw new Error(`expected exactly one event with the gateway's cost, got ${costs.length}`);
  return costs[0]!;
}

/** CONTRACT §9 on a pass-through JSON answer: the upstream's answer with the gateway's `cost` in its usage. Returns that cost. */
export function expectPassThroughJson(got: string, upstream: string): number {
  const g = JSON.parse(got);
  const usage = usageIn(g);
  if (typeof usage?.cost !== "number") throw new Error(`the answer carries no cost: ${got}`);
  const cost = usage.cost;
  delete usage.cost;
  if (JSON.stringify(g) !== JSON.stringify(JSON.parse(upstream))) throw new Error(`the answer differs beyond its cost: ${got} vs ${upstream}`);
  return cost;
}
