// Secrets never at rest in clear, never in logs: after a run through every management operation
// that takes a secret (saved provider keys, bridge tokens, subscription sign-ins incl. a refresh,
// failed uploads, raw routing keys), every column of every table and every log line (at trace
// level) are searched for each secret and any sizeable piece of it. Only fingerprints are found.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockSubBackend, type MockSubBackend } from "../mocks/sub-backend.ts";
import { startMockBridge, type MockBridge } from "../mocks/bridge.ts";
import { loadSubAuth, saveSubAuth } from "../../src/providers/sub/sign-in-store.ts";
import { checkBridges } from "../../src/jobs/bridge-health.ts";
import { authJson, fakeProviderKey } from "./helpers.ts";

let gw: TestGateway;
let sub: MockSubBackend;
let bridge: MockBridge;
const secrets: string[] = [];
const fingerprints: string[] = [];

beforeAll(async () => {
  sub = await startMockSubBackend();
  bridge = await startMockBridge();
  gw = await startTestGateway({ SUB_API_BASE_URL: sub.url, LOG_LEVEL: "trace" });
}, 60_000);
afterAll(async () => {
  await gw?.stop();
  await sub?.stop();
  await bridge?.stop();
}, 60_000);

async function exercise() {
  const a = await createAccount(gw);
  secrets.push(a.token);
  const post = (path: string, body: unknown) => gw.call(path, { method: "POST", token: a.token, body });

  // Saved provider keys: stored, listed, one deleted, and refused uploads carrying a secret.
  const credIds: string[] = [];
  for (const p of ["openai", "anthropic", "google"]) {
    const key = fakeProviderKey(p);
    secrets.push(key);
    if (p !== "google") fingerprints.push(key.slice(-4)); // the google key is deleted below
    const r = await post("/v1/organizations/credentials", { provider: p, api_key: key, label: `${p} main` });
    expect(r.status).toBe(200);
    credIds.push(r.body.credential.id);
  }
  await gw.call(`/v1/organizations/credentials?id=${credIds[2]}`, { method: "DELETE", token: a.token });
  const refusedKey = fakeProviderKey("refused");
  secrets.push(refusedKey);
  expect((await post("/v1/organizations/credentials", { provider: "nope", api_key: refusedKey })).status).toBe(400);
  expect((await post("/v1/organizations/credentials", { provider: "openai", api_key: refusedKey, apikey: refusedKey })).status).toBe(400);

  // Bridges: registered, health-checked, one revoked; a refused registration with a token.
  const bridgeTokens = [`bridge-secret-${crypto.randomUUID()}`, `bridge-secret-${crypto.randomUUID()}`];
  const bridgeIds: string[] = [];
  for (const t of bridgeTokens) {
    secrets.push(t);
    fingerprints.push(t.slice(-4));
    const r = await post("/v1/organizations/bridges", { base_url: bridge.url, token: t });
    expect(r.status).toBe(200);
    bridgeIds.push(r.body.bridge.id);
  }
  await checkBridges(gw.ctx);
  await gw.call(`/v1/organizations/bridges?id=${bridgeIds[1]}`, { method: "DELETE", token: a.token });
  const refusedToken = `bridge-refused-${crypto.randomUUID()}`;
  secrets.push(refusedToken);
  expect((await post("/v1/organizations/bridges", { base_url: "ftp://x", token: refusedToken })).status).toBe(400);

  // Sub sessions: connected, refused by the backend, replaced, refreshed, revoked; a malformed upload.
  const signIns = [authJson("one"), authJson("two"), authJson("three")];
  for (const s of signIns) secrets.push(s.tokens.access_token, s.tokens.refresh_token, s.tokens.id_token);
  expect((await post("/v1/organizations/sub-session", { auth_json: signIns[0] })).status).toBe(200);
  sub.setFail(401);
  expect((await post("/v1/organizations/sub-session", { auth_json: signIns[1], source_path: "/home/me/.codex/auth.json" })).status).toBe(200);
  sub.setFail(null);
  const live = await post("/v1/organizations/sub-session", { auth_json: JSON.stringify(signIns[2]), ttl_seconds: 3600 });
  expect(live.status).toBe(200);
  const current = (await loadSubAuth(gw.ctx, live.body.id))!;
  const refreshed = { ...current, tokens: { ...current.tokens, access_token: `at-refreshed-${crypto.randomUUID()}`, refresh_token: `rt-refreshed-${crypto.randomUUID()}` } };
  secrets.push(refreshed.tokens.access_token, refreshed.tokens.refresh_token);
  await saveSubAuth(gw.ctx, live.body.id, refreshed);
  const half = authJson("half");
  secrets.push(half.tokens.access_token);
  expect((await post("/v1/organizations/sub-session", { auth_json: { tokens: { access_token: half.tokens.access_token } } })).status).toBe(400);

  // Routing keys: raw keys from create and regenerate.
  const k = await post("/v1/organizations/routing-keys", { label: "fleet", providers: [{ provider: "openai", credential_id: credIds[0] }, { provider: "bridge", bridge_instance_id: bridgeIds[0] }, { provider: "sub", sub_session_id: live.body.id }] });
  expect(k.status).toBe(200);
  secrets.push(k.body.raw_key);
  const regen = await gw.call(`/v1/organizations/routing-keys?id=${k.body.routing_key.id}`, { method: "PATCH", token: a.token, body: { regenerate: true } });
  secrets.push(regen.body.raw_key);
  await gw.call("/v1/organizations/routing-keys?include=lanes", { token: a.token });
  await gw.call("/v1/organizations/usage", { token: a.token });

  await gw.call("/v1/organizations/sub-session", { method: "DELETE", token: a.token });
}

async function allDatabaseText(): Promise<string> {
  const rows = (r: any): any[] => (Array.isArray(r) ? r : r.rows);
  const tables = rows(await gw.ctx.db.execute(sql.raw(
    "select table_schema, table_name from information_schema.tables where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema')",
  )));
  expect(tables.length).toBeGreaterThan(5);
  let out = "";
  for (const t of tables) {
    // Every column of every row, as Postgres prints the row: text, jsonb and all.
    const q = `select t::text as row from "${t.table_schema}"."${t.table_name}" t`;
    for (const r of rows(await gw.ctx.db.execute(sql.raw(q)))) out += `${r.row}\n`;
  }
  return out;
}

describe(`secrets at rest and in logs (${storesLabel})`, () => {
  test("after every secret-bearing management operation, no table column and no log line holds a secret or a sizeable piece of one; fingerprints are there", async () => {
    await exercise();
    const db = await allDatabaseText();
    const logs = gw.logs.join("");
    expect(logs.length).toBeGreaterThan(0);
    expect(secrets.length).toBeGreaterThan(20);
    for (const s of secrets) {
      // The whole secret, and its middle (a truncated or partly masked copy would still leak it).
      const middle = s.slice(4, 16);
      for (const [where, text] of [["database", db], ["logs", logs]] as const) {
        if (text.includes(s) || text.includes(middle)) throw new Error(`a secret (ending …${s.slice(-4)}) was found in the ${where}`);
      }
    }
    for (const f of fingerprints) expect(db).toContain(f);
  });
});
