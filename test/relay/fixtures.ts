// Fixtures for relay tests: saved credentials and routing keys inserted directly (their
// management endpoints have their own tests), encrypted and hashed exactly as management does.
import { eq } from "drizzle-orm";
import type { Gateway } from "../../src/gateway.ts";
import { randomToken, sha256Hex } from "../../src/lib/crypto.ts";
import { newId } from "../../src/lib/ids.ts";
import { routingKeys, type LaneRow } from "../../src/store/db/schema/index.ts";
import { publishInvalidation } from "../../src/store/invalidation.ts";
import { addCredential, startRelayWorld } from "../helpers/relay-world.ts";

export { addCredential };

export function lane(provider: string, credentialId: string | null, extra: Partial<LaneRow> = {}): LaneRow {
  return {
    provider,
    model: null,
    credential_id: credentialId,
    sub_session_id: null,
    bridge_instance_id: null,
    category_key: null,
    category_description: null,
    fallback_to_default_model: true,
    reasoning_effort: null,
    verbosity: null,
    service_tier: null,
    ...extra,
  };
}

export interface KeyOptions {
  lanes: LaneRow[];
  monthlyBudgetUsd?: number | null;
  budgetExcludesSeats?: boolean;
  label?: string;
  rpmLimit?: number | null;
  tpmLimit?: number | null;
  maxConcurrentRequests?: number | null;
  /** The response cache setting (null: off). */
  cache?: { ttl_seconds: number; shared: boolean } | null;
}

export async function addRoutingKey(gw: Gateway, accountId: string, opts: KeyOptions) {
  const id = newId("rkey");
  const raw = `gw_${randomToken(40)}`;
  await gw.ctx.db.insert(routingKeys).values({
    id, accountId,
    label: opts.label ?? "test",
    keyHash: sha256Hex(raw),
    keyPrefix: raw.slice(0, 10),
    monthlyBudgetUsd: opts.monthlyBudgetUsd ?? null,
    budgetExcludesSeats: opts.budgetExcludesSeats ?? true,
    rpmLimit: opts.rpmLimit ?? null,
    tpmLimit: opts.tpmLimit ?? null,
    maxConcurrentRequests: opts.maxConcurrentRequests ?? null,
    cache: opts.cache ?? null,
    lanes: opts.lanes,
  });
  return { id, raw, hash: sha256Hex(raw) };
}

/** Revokes a key the way management does: row update, then the invalidation message. */
export async function revokeKey(gw: Gateway, key: { id: string; hash: string }) {
  await gw.ctx.db.update(routingKeys).set({ revokedAt: new Date() }).where(eq(routingKeys.id, key.id));
  await publishInvalidation(gw.ctx, { kind: "key", hash: key.hash });
}

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
