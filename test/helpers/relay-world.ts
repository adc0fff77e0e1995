// The setup most relay tests share: one mock upstream per provider, a test gateway whose provider
// base URLs point at them, an account, and a saved credential per provider (inserted directly, as
// management stores them). Started once per test file (beforeAll); stop() stops the gateway, then
// the mocks.
import type { Gateway } from "../../src/gateway.ts";
import { randomToken } from "../../src/lib/crypto.ts";
import { newId } from "../../src/lib/ids.ts";
import { credentials } from "../../src/store/db/schema/index.ts";
import { startMockAnthropic, type MockAnthropic } from "../mocks/anthropic-upstream.ts";
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

/** Providers with a mock of their own protocol; every other provider gets an OpenAI-compatible mock. */
interface Mocks { anthropic: MockAnthropic }
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
  const up = {} as Record<string, MockUpstream | MockAnthropic>;
  const stopMocks = async () => { await Promise.all(Object.values(up).map((m) => m.stop())); };
  let gw: TestGateway | undefined;
  try {
    await Promise.all(opts.providers.map(async (p) => { up[p] = p === "anthropic" ? await startMockAnthropic() : await startMockOpenAI(); }));
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
