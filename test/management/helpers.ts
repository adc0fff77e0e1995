// Shared fixtures for the management suites: saved keys, bridges and sub sessions created through
// the public API, and a recorder of cache-invalidation messages.
import { expect } from "bun:test";
import { REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import type { Invalidation } from "../../src/store/invalidation.ts";

/** A unique-looking provider key (the tests search storage and logs for it afterwards). */
export const fakeProviderKey = (tag = "k") => `sk-test-${tag}-${crypto.randomUUID().replaceAll("-", "")}`;

export async function saveCredential(gw: TestGateway, token: string, provider = "openai", apiKey = fakeProviderKey(provider), label?: string) {
  const r = await gw.call("/v1/organizations/credentials", { method: "POST", token, body: { provider, api_key: apiKey, ...(label ? { label } : {}) } });
  expect(r.status).toBe(200);
  return r.body.credential as { id: string; provider: string; label: string; key_fingerprint: string; created_at: string };
}

export async function registerBridge(gw: TestGateway, token: string, baseUrl: string, bridgeToken = `brtok-${crypto.randomUUID()}`, extra: Record<string, unknown> = {}) {
  const r = await gw.call("/v1/organizations/bridges", { method: "POST", token, body: { base_url: baseUrl, token: bridgeToken, ...extra } });
  expect(r.status).toBe(200);
  return r.body.bridge as Record<string, any> & { id: string };
}

export function authJson(tag: string = crypto.randomUUID()) {
  return {
    tokens: {
      access_token: `at-${tag}-${crypto.randomUUID()}`,
      refresh_token: `rt-${tag}-${crypto.randomUUID()}`,
      id_token: `idt-${tag}-${crypto.randomUUID()}`,
      account_id: `acc-${tag}`,
    },
    last_refresh: new Date().toISOString(),
    OPENAI_API_KEY: null,
  };
}

export async function connectSub(gw: TestGateway, token: string, auth = authJson(), extra: Record<string, unknown> = {}) {
  const r = await gw.call("/v1/organizations/sub-session", { method: "POST", token, body: { auth_json: auth, ...extra } });
  expect(r.status).toBe(200);
  return r.body as Record<string, any> & { id: string };
}

/**
 * Records invalidation messages as another instance sharing the stores would receive them: over
 * Redis through a second gateway when REDIS_URL is set, else on the gateway's in-process KV.
 */
export async function invalidationRecorder(gw: TestGateway) {
  const seen: Invalidation[] = [];
  let peer: TestGateway | null = null;
  if (REAL_STORES) peer = await startTestGateway({}, { shareWith: gw });
  await (peer ?? gw).ctx.kv.subscribe("gw:invalidate", (m) => { seen.push(JSON.parse(m)); });
  return {
    seen,
    /** Waits until a message matching `pred` arrived (pub/sub is asynchronous). */
    async waitFor(pred: (m: Invalidation) => boolean, ms = 3000): Promise<Invalidation> {
      const end = Date.now() + ms;
      for (;;) {
        const m = seen.find(pred);
        if (m) return m;
        if (Date.now() > end) throw new Error(`no matching invalidation within ${ms} ms; saw ${JSON.stringify(seen.slice(-5))}`);
        await Bun.sleep(10);
      }
    },
    async stop() { await peer?.stop(); },
  };
}

/** Polls `f` until it returns a truthy value (for background jobs); fails after `ms`. */
export async function eventually<T>(f: () => Promise<T | null | undefined | false>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`condition not met within ${ms} ms`);
    await Bun.sleep(25);
  }
}
