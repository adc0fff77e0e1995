// One gateway wired to every vendor mock, with an account, saved keys, a connected sub sign-in
// and one routing key per lane, for the end-to-end translation tests.
import { eq } from "drizzle-orm";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startMockAnthropic, type MockAnthropic } from "../mocks/anthropic-upstream.ts";
import { startMockGemini, type MockGemini } from "../mocks/gemini-upstream.ts";
import { startMockOpenAIProtocol, type MockOpenAIProtocol } from "./openai-protocol-upstream.ts";

export interface World {
  gw: TestGateway;
  anthropic: MockAnthropic;
  gemini: MockGemini;
  openai: MockOpenAIProtocol;
  accountToken: string;
  /** provider → {rawKey, keyId} of a routing key with that one lane. */
  keys: Record<string, { rawKey: string; keyId: string }>;
  /** provider → the lane object (as POST routing-keys takes it). */
  lanes: Record<string, Record<string, unknown>>;
  /** A routing key with these lanes, in order. */
  createKey(lanes: Record<string, unknown>[]): Promise<{ rawKey: string; keyId: string }>;
  stop(): Promise<void>;
}

async function ok(r: { status: number; body: any }, what: string) {
  if (r.status !== 200) throw new Error(`${what} failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

export async function startWorld(env: Record<string, string> = {}): Promise<World> {
  const anthropic = await startMockAnthropic();
  const gemini = await startMockGemini();
  const openai = await startMockOpenAIProtocol();
  const gw = await startTestGateway({
    PROVIDER_ANTHROPIC_BASE_URL: anthropic.url,
    PROVIDER_GOOGLE_BASE_URL: gemini.url,
    PROVIDER_OPENAI_BASE_URL: openai.url,
    PROVIDER_MISTRAL_BASE_URL: openai.url,
    SUB_API_BASE_URL: openai.subUrl,
    SUB_AUTH_BASE_URL: openai.subUrl,
    ...env,
  });
  const account = await createAccount(gw);
  const token = account.token;
  const credential = async (provider: string, apiKey: string) =>
    (await ok(await gw.call("/v1/organizations/credentials", { method: "POST", token, body: { provider, api_key: apiKey } }), `save ${provider} key`)).credential.id as string;
  const session = await ok(await gw.call("/v1/organizations/sub-session", {
    method: "POST",
    token,
    body: { auth_json: { tokens: { access_token: openai.sub.accessToken, refresh_token: "rt-unused", id_token: null, account_id: openai.sub.accountId }, last_refresh: new Date().toISOString(), OPENAI_API_KEY: null } },
  }), "connect sub");
  if (session.status !== "connected" || session.sub_host?.provisioned !== true) throw new Error(`sub session not provisioned: ${JSON.stringify(session)}`);
  const lanes: Record<string, Record<string, unknown>> = {
    anthropic: { provider: "anthropic", credential_id: await credential("anthropic", anthropic.apiKey) },
    google: { provider: "google", credential_id: await credential("google", gemini.apiKey) },
    mistral: { provider: "mistral", credential_id: await credential("mistral", openai.apiKey) },
    openai: { provider: "openai", credential_id: await credential("openai", openai.apiKey) },
    sub: { provider: "sub", sub_session_id: session.id },
  };
  const createKey = async (providers: Record<string, unknown>[]) => {
    const body = await ok(await gw.call("/v1/organizations/routing-keys", { method: "POST", token, body: { label: "translation test", providers } }), "create key");
    return { rawKey: body.raw_key as string, keyId: body.routing_key.id as string };
  };
  const keys: World["keys"] = {};
  for (const [name, lane] of Object.entries(lanes)) keys[name] = await createKey([lane]);
  return {
    gw, anthropic, gemini, openai, accountToken: token, keys, lanes, createKey,
    async stop() {
      await gw.stop();
      await anthropic.stop();
      await gemini.stop();
      await openai.stop();
    },
  };
}

/** The usage records of one request (matched by the x-request-id the test sent). */
export async function usageRowsOf(gw: TestGateway, requestId: string) {
  const q = gw.ctx.services.usage as { flush(): Promise<void> } | undefined;
  await q?.flush();
  return gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.requestId, requestId));
}
