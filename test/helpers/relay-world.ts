// The setup most relay tests share: one mock upstream per provider, a test gateway whose provider
// base URLs point at them, an account, and a saved credential per provider (inserted directly, as
// management stores them). Started once per test file (beforeAll); stop() stops the gateway, then
// the mocks.
import { afterAll, beforeAll } from "bun:test";
import type { SQL } from "drizzle-orm";
import type { Gateway } from "../../src/gateway.ts";
import { randomToken, sha256Hex } from "../../src/lib/crypto.ts";
import { newId } from "../../src/lib/ids.ts";
import { resolveRoutingKey } from "../../src/relay/auth.ts";
import { credentials, routingKeys, usageRecords, type LaneRow } from "../../src/store/db/schema/index.ts";
import { startMockAnthropic, type MockAnthropic } from "../mocks/anthropic-upstream.ts";
import { startMockGemini, type MockGemini } from "../mocks/gemini-upstream.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { createAccount, startTestGateway, type StartOptions, type TestGateway } from "./gateway.ts";

/** A saved provider key, inserted directly, encrypted exactly as management stores it. */
export async function addCredential(gw: Gateway, accountId: string, provider: string, apiKey = `sk-test-${randomToken(24)}`) {
  const id = newId("cred");
  await gw.ctx.db.insert(credentials).values({
    id, accountId, provider, label: provider,
    keyCiphertext: gw.ctx.secrets.seal(apiKey, `credentials:${id}`),
    keyFingerprint: apiKey.slice(-4),
  });
  return { id, apiKey };
}

/** A lane of a routing key, with every setting at its default unless given. */
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
  /** Session affinity as stored (null: the default, 0: off, N: N seconds). */
  sessionAffinityTtlSeconds?: number | null;
}

/** A routing key, inserted directly, hashed exactly as management stores it. */
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
    sessionAffinityTtlSeconds: opts.sessionAffinityTtlSeconds ?? null,
    lanes: opts.lanes,
  });
  return { id, raw, hash: sha256Hex(raw) };
}

/** A routing key's context as the relay resolves it from a request's Authorization header. */
export function keyContextOf(gw: Gateway, raw: string) {
  return resolveRoutingKey(gw.ctx, new Request("http://gw/", { headers: { authorization: `Bearer ${raw}` } }));
}

/** addRoutingKey(), with the key's context as the relay resolves it (`ctx`, for estimates and counters). */
export async function addKeyWithContext(gw: Gateway, accountId: string, opts: KeyOptions) {
  const k = await addRoutingKey(gw, accountId, opts);
  return { ...k, ctx: await keyContextOf(gw, k.raw) };
}

/** The usage records matching `where`, after the gateway's usage pipeline has written out everything recorded. */
export async function usageRows(gw: Gateway, where: SQL | undefined) {
  await gw.ctx.services.usage.flush();
  return gw.ctx.db.select().from(usageRecords).where(where);
}

/** Providers with a mock of their own protocol; every other provider gets an OpenAI-compatible mock. */
interface Mocks { anthropic: MockAnthropic; google: MockGemini }
type MockFor<P extends string> = P extends keyof Mocks ? Mocks[P] : MockUpstream;

export interface RelayWorldOptions<P extends string> {
  /** Providers to serve, each from its own mock upstream (e.g. ["openai", "groq"]). */
  providers: readonly P[];
  /** Extra gateway environment (overrides the provider base URLs if it names them). */
  env?: Record<string, string>;
  /** Save no credentials (tests of the credential paths save their own). */
  noCredentials?: boolean;
  gateway?: StartOptions;
}

export interface RelayWorld<P extends string> {
  gw: TestGateway;
  /** provider → its mock upstream. */
  up: { [K in P]: MockFor<K> };
  acct: { id: string; email: string; token: string };
  /** provider → the account's saved credential for it (absent with noCredentials). */
  cred: { [K in P]: { id: string; apiKey: string } };
  stop(): Promise<void>;
}

export async function startRelayWorld<P extends string>(opts: RelayWorldOptions<P>): Promise<RelayWorld<P>> {
  const up = {} as Record<string, MockUpstream | MockAnthropic | MockGemini>;
  const stopMocks = async () => { await Promise.all(Object.values(up).map((m) => m.stop())); };
  let gw: TestGateway | undefined;
  try {
    await Promise.all(opts.providers.map(async (p) => { up[p] = p === "anthropic" ? await startMockAnthropic() : p === "google" ? await startMockGemini() : await startMockOpenAI(); }));
    const env: Record<string, string> = {};
    for (const p of opts.providers) env[`PROVIDER_${p.toUpperCase()}_BASE_URL`] = up[p]!.url;
    gw = await startTestGateway({ ...env, ...opts.env }, opts.gateway);
    const acct = await createAccount(gw);
    const cred = {} as Record<string, { id: string; apiKey: string }>;
    if (!opts.noCredentials) {
      for (const p of opts.providers) {
        const m = up[p]!;
        cred[p] = await addCredential(gw, acct.id, p, "apiKey" in m ? m.apiKey : undefined);
      }
    }
    const g = gw;
    return {
      gw: g, acct,
      up: up as RelayWorld<P>["up"],
      cred: cred as RelayWorld<P>["cred"],
      async stop() {
        await g.stop();
        await stopMocks();
      },
    };
  } catch (e) {
    await gw?.stop().catch(() => {});
    await stopMocks().catch(() => {});
    throw e;
  }
}

/** The key-and-lane world the /blitz tests share: openai lanes go to mock A, groq lanes to mock B. */
export interface BlitzWorld {
  gw: TestGateway;
  A: MockUpstream;
  B: MockUpstream;
  acct: { id: string; email: string; token: string };
  credA: { id: string; apiKey: string };
  credB: { id: string; apiKey: string };
  /** A routing key with one openai lane (mock A) and any other settings. */
  oneLane(extra?: Omit<KeyOptions, "lanes">): Promise<{ id: string; raw: string; hash: string }>;
  /** A routing key whose openai lane (mock A) falls back to its groq lane (mock B). */
  twoLanes(extra?: Omit<KeyOptions, "lanes">): Promise<{ id: string; raw: string; hash: string }>;
  /** Writes the queued usage records now. */
  flush(): Promise<void>;
  /** The usage records matching `where`, after the queue is flushed. */
  records(where: SQL | undefined): Promise<Array<typeof usageRecords.$inferSelect>>;
}

/**
 * The /blitz world for the enclosing describe block: started in its beforeAll, stopped in its
 * afterAll. The returned object is filled once beforeAll has run; read its fields inside tests.
 */
export function useBlitzWorld(): BlitzWorld {
  let world: RelayWorld<"openai" | "groq"> | undefined;
  const w = {
    oneLane: (extra = {}) => addRoutingKey(w.gw, w.acct.id, { lanes: [lane("openai", w.credA.id)], ...extra }),
    twoLanes: (extra = {}) => addRoutingKey(w.gw, w.acct.id, { lanes: [lane("openai", w.credA.id), lane("groq", w.credB.id)], ...extra }),
    flush: () => w.gw.ctx.services.usage.flush(),
    records: (where) => usageRows(w.gw, where),
  } as BlitzWorld;
  beforeAll(async () => {
    world = await startRelayWorld({ providers: ["openai", "groq"] });
    Object.assign(w, { gw: world.gw, A: world.up.openai, B: world.up.groq, acct: world.acct, credA: world.cred.openai, credB: world.cred.groq });
  }, 60_000);
  afterAll(async () => {
    await world?.stop();
  }, 60_000);
  return w;
}
