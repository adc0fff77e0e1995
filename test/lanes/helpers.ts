// Fixtures for lane tests: a gateway pointed at the mock subscription backend and auth server,
// an account, and its connected sign-in.
import { eq } from "drizzle-orm";
import { createAccount, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startMockSubBackend, type MockSubBackend, type MockSubBackendOptions } from "../mocks/sub-backend.ts";
import { makeAccessToken, makeAuthJson, startMockSubAuth, type MockSubAuth } from "../mocks/sub-auth.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { loadSubAuth, saveSubAuth } from "../../src/providers/sub/sign-in-store.ts";
import { forgetAuth } from "../../src/providers/sub/credentials.ts";
import { subSessions } from "../../src/store/db/schema/index.ts";

export interface SubWorld {
  gw: TestGateway;
  backend: MockSubBackend;
  auth: MockSubAuth;
  account: { id: string; token: string };
  stop(): Promise<void>;
}

/** A gateway whose SUB_* URLs point at fresh mocks (strict backend: only issued tokens work). */
export async function startSubWorld(env: Record<string, string> = {}, backendOpts: MockSubBackendOptions = {}): Promise<SubWorld> {
  const backend = await startMockSubBackend({ strict: true, ...backendOpts });
  const auth = await startMockSubAuth({ backend });
  const gw = await startTestGateway({ SUB_API_BASE_URL: backend.url, SUB_AUTH_BASE_URL: auth.url, ...env });
  const account = await createAccount(gw);
  return {
    gw, backend, auth, account,
    async stop() {
      await gw.stop();
      await backend.stop();
      await auth.stop();
    },
  };
}

export interface SubOpenAIWorld extends SubWorld {
  openai: MockUpstream;
  /** The account's saved OpenAI key, for an openai lane beside the sub lane. */
  openaiCred: string;
}

/** A sub world whose gateway also reaches a mock OpenAI upstream, with an OpenAI key saved; stop() stops both. */
export async function startSubWorldWithOpenAI(apiKey: string): Promise<SubOpenAIWorld> {
  const openai = await startMockOpenAI();
  const w = await startSubWorld({ PROVIDER_OPENAI_BASE_URL: openai.url });
  const openaiCred = await saveCredential(w.gw, w.account.token, "openai", apiKey);
  return {
    ...w, openai, openaiCred,
    async stop() {
      await w.stop();
      await openai.stop();
    },
  };
}

/** Replaces the stored access token with one whose exp has passed (time moved on); returns it. */
export async function expireStoredToken(w: Pick<SubWorld, "gw" | "backend">, sessionId: string, accountId: string): Promise<string> {
  const auth = (await loadSubAuth(w.gw.ctx, sessionId))!;
  const expired = makeAccessToken(accountId, -60);
  w.backend.allow(expired, accountId);
  await saveSubAuth(w.gw.ctx, sessionId, { ...auth, tokens: { ...auth.tokens, access_token: expired } });
  forgetAuth(w.gw.ctx, sessionId);
  return expired;
}

/** Connects a sign-in through the management API; returns the session id and the file. */
export async function connectSub(w: Pick<SubWorld, "gw" | "backend" | "auth" | "account">, opts: { accessTtl?: number; ttl_seconds?: number } = {}) {
  const { accountId, authJson } = makeAuthJson({ backend: w.backend, auth: w.auth, accessTtl: opts.accessTtl });
  const body: Record<string, unknown> = { auth_json: authJson };
  if (opts.ttl_seconds !== undefined) body.ttl_seconds = opts.ttl_seconds;
  const r = await w.gw.call("/v1/organizations/sub-session", { method: "POST", token: w.account.token, body });
  if (r.status !== 200) throw new Error(`connect failed: ${r.status} ${JSON.stringify(r.body)}`);
  return { sessionId: r.body.id as string, subAccountId: accountId, authJson, session: r.body };
}

/** The sealed sign-in as stored (tests prove secrets are not stored in clear). */
export async function storedCiphertext(gw: TestGateway, sessionId: string): Promise<string | null> {
  const rows = await gw.ctx.db.select({ c: subSessions.authCiphertext }).from(subSessions).where(eq(subSessions.id, sessionId));
  return rows[0]?.c ?? null;
}

/** Creates a routing key through the management API; returns the raw key and the key object. */
export async function createKey(gw: TestGateway, accountToken: string, body: Record<string, unknown>) {
  const r = await gw.call("/v1/organizations/routing-keys", { method: "POST", token: accountToken, body });
  if (r.status !== 200) throw new Error(`routing key create failed: ${r.status} ${JSON.stringify(r.body)}`);
  return { rawKey: r.body.raw_key as string, key: r.body.routing_key };
}

/** Registers a bridge through the management API; returns its id. */
export async function registerBridge(gw: TestGateway, accountToken: string, baseUrl: string, token: string): Promise<string> {
  const r = await gw.call("/v1/organizations/bridges", { method: "POST", token: accountToken, body: { base_url: baseUrl, token } });
  if (r.status !== 200) throw new Error(`bridge register failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.bridge.id as string;
}

/** Saves a provider API key through the management API; returns its id. */
export async function saveCredential(gw: TestGateway, accountToken: string, provider: string, apiKey: string): Promise<string> {
  const r = await gw.call("/v1/organizations/credentials", { method: "POST", token: accountToken, body: { provider, api_key: apiKey } });
  if (r.status !== 200) throw new Error(`credential save failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.credential.id as string;
}

/** A chat completion request through the gateway. */
export function chat(gw: TestGateway, rawKey: string, body: Record<string, unknown>) {
  return gw.call("/v1/chat/completions", { token: rawKey, body });
}

/** Waits until `check` returns a truthy value (polling), or throws after `ms`. */
export async function eventually<T>(check: () => Promise<T> | T, ms = 5000, what = "condition"): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Usage records of a key after the queue flushed. */
export async function usageOf(gw: TestGateway, keyId: string) {
  const q = gw.ctx.services.usage as { flush(): Promise<void> } | undefined;
  await q?.flush();
  const { usageRecords } = await import("../../src/store/db/schema/index.ts");
  return gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, keyId));
}
