// Saved provider keys (CONTRACT §6): POST/GET/DELETE, the 13 provider ids, encryption bound to the
// row, fingerprint of the last four characters only, account invalidation on delete.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { addToken, createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { credentials } from "../../src/store/db/schema/index.ts";
import { API_KEY_PROVIDER_IDS } from "../../src/providers/endpoints.ts";
import { openCredentialKey } from "../../src/management/credentials/service.ts";
import { fakeProviderKey, invalidationRecorder, saveCredential } from "./helpers.ts";

const CRED = "/v1/organizations/credentials";
let gw: TestGateway;
let A: { id: string; token: string; rk: string };

beforeAll(async () => {
  gw = await startTestGateway();
  const a = await createAccount(gw);
  A = { ...a, rk: await addToken(gw, a.id, "read_only") };
}, 60_000);
afterAll(async () => { await gw?.stop(); }, 60_000);

const post = (body: unknown, token = A.token) => gw.call(CRED, { method: "POST", token, body });

describe(`credentials (${storesLabel})`, () => {
  test("POST {provider, api_key, label} answers {credential: {id, provider, label, key_fingerprint, created_at}} with the last 4 characters as fingerprint and never the key", async () => {
    const key = fakeProviderKey("post");
    const r = await post({ provider: "anthropic", api_key: key, label: "team key" });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body)).toEqual(["credential"]);
    const c = r.body.credential;
    expect(Object.keys(c).sort()).toEqual(["created_at", "id", "key_fingerprint", "label", "provider"]);
    expect(c).toMatchObject({ provider: "anthropic", label: "team key", key_fingerprint: key.slice(-4) });
    expect(Number.isNaN(Date.parse(c.created_at))).toBe(false);
    expect(JSON.stringify(r.body)).not.toContain(key);
  });

  test("the key is stored AES-256-GCM encrypted and bound to its row (aad credentials:<id>)", async () => {
    const key = fakeProviderKey("sealed");
    const c = await saveCredential(gw, A.token, "openai", key);
    const [row] = await gw.ctx.db.select().from(credentials).where(eq(credentials.id, c.id));
    expect(row!.keyCiphertext).not.toContain(key);
    expect(row!.keyFingerprint).toBe(key.slice(-4));
    expect(gw.ctx.secrets.open(row!.keyCiphertext, `credentials:${c.id}`)).toBe(key);
    expect(() => gw.ctx.secrets.open(row!.keyCiphertext, "credentials:cred_other")).toThrow();
    expect(await openCredentialKey(gw.ctx, A.id, c.id)).toEqual({ provider: "openai", apiKey: key });
  });

  test("the 13 provider ids are accepted; any other provider (sub, bridge, unknown) is 400 naming provider", async () => {
    for (const p of API_KEY_PROVIDER_IDS) expect((await post({ provider: p, api_key: fakeProviderKey(p) })).status).toBe(200);
    for (const p of ["sub", "bridge", "OpenAI", "acme"]) {
      const r = await post({ provider: p, api_key: fakeProviderKey() });
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("bad_request");
      expect(r.body.error).toContain("`provider`");
    }
  });

  test("validation: api_key required and at least 8 characters, label at most 80 with a default, unknown fields refused; no error echoes the key", async () => {
    const missing = await post({ provider: "openai" });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toContain("`api_key`");
    const short = await post({ provider: "openai", api_key: "sk-1234" });
    expect(short.status).toBe(400);
    expect(short.body.error).toContain("`api_key`");
    expect(short.body.error).not.toContain("sk-1234");
    expect((await post({ provider: "openai", api_key: fakeProviderKey(), label: "l".repeat(81) })).body.error).toContain("`label`");
    const dflt = await post({ provider: "groq", api_key: fakeProviderKey() });
    expect(dflt.body.credential.label.length).toBeGreaterThan(0);
    const extra = await post({ provider: "openai", api_key: fakeProviderKey(), account_id: "acct_x" });
    expect(extra.status).toBe(400);
    expect(extra.body.error).toContain("`account_id`");
  });

  test("GET (rk_ or sk_) answers {credentials: [...]} oldest first, without keys", async () => {
    const key = fakeProviderKey("listed");
    const c = await saveCredential(gw, A.token, "mistral", key);
    for (const token of [A.token, A.rk]) {
      const r = await gw.call(CRED, { token });
      expect(r.status).toBe(200);
      expect(Object.keys(r.body)).toEqual(["credentials"]);
      const found = r.body.credentials.find((x: any) => x.id === c.id);
      expect(found).toEqual(c);
      expect(JSON.stringify(r.body)).not.toContain(key);
      const times = r.body.credentials.map((x: any) => Date.parse(x.created_at));
      expect(times).toEqual([...times].sort((x: number, y: number) => x - y));
    }
  });

  test("DELETE ?id= answers {deleted: true}, removes the key, and publishes an account invalidation", async () => {
    const rec = await invalidationRecorder(gw);
    try {
      const c = await saveCredential(gw, A.token, "xai");
      const r = await gw.call(`${CRED}?id=${c.id}`, { method: "DELETE", token: A.token });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ deleted: true });
      expect(await gw.ctx.db.select().from(credentials).where(eq(credentials.id, c.id))).toEqual([]);
      const list = await gw.call(CRED, { token: A.token });
      expect(list.body.credentials.some((x: any) => x.id === c.id)).toBe(false);
      await rec.waitFor((m) => m.kind === "account" && m.accountId === A.id);
      const again = await gw.call(`${CRED}?id=${c.id}`, { method: "DELETE", token: A.token });
      expect(again.status).toBe(400);
      expect(again.body.code).toBe("bad_request");
    } finally {
      await rec.stop();
    }
  });

  test("DELETE needs ?id= and an sk_ token (rk_ is 403 read_only_token)", async () => {
    const c = await saveCredential(gw, A.token, "cohere");
    const noId = await gw.call(CRED, { method: "DELETE", token: A.token });
    expect(noId.status).toBe(400);
    expect(noId.body.error).toContain("`id`");
    const ro = await gw.call(`${CRED}?id=${c.id}`, { method: "DELETE", token: A.rk });
    expect(ro.status).toBe(403);
    expect(ro.body.code).toBe("read_only_token");
    expect((await gw.call(CRED, { method: "POST", token: A.rk, body: { provider: "openai", api_key: fakeProviderKey() } })).status).toBe(403);
  });
});
