// Legacy aliases (SPEC "Versioning"): /v1/routing-keys, /v1/bridges and /api/sub?action=<action>
// behave exactly like their /v1/organizations/... twins, with the same auth and plan gate.
// /api/sub actions: status (GET), connect (POST), disconnect (POST or DELETE).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { addToken, createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockSubBackend, type MockSubBackend } from "../mocks/sub-backend.ts";
import { startMockBridge, type MockBridge } from "../mocks/bridge.ts";
import { authJson, saveCredential } from "./helpers.ts";

let gw: TestGateway;
let sub: MockSubBackend;
let bridge: MockBridge;
let A: { id: string; token: string; rk: string };
let free: { token: string };

beforeAll(async () => {
  sub = await startMockSubBackend();
  bridge = await startMockBridge();
  gw = await startTestGateway({ SUB_API_BASE_URL: sub.url });
  const a = await createAccount(gw);
  A = { ...a, rk: await addToken(gw, a.id, "read_only") };
  free = await createAccount(gw, { plan: "free" });
}, 60_000);
afterAll(async () => {
  await gw?.stop();
  await sub?.stop();
  await bridge?.stop();
}, 60_000);

/** Drops fields that differ between two otherwise identical objects (ids, times, secrets). */
const shape = (o: any): any =>
  Array.isArray(o) ? o.map(shape)
  : o && typeof o === "object" ? Object.fromEntries(Object.entries(o).filter(([k]) => !/(^id$|_at$|raw_key|key_prefix|token_fingerprint|current_month)/.test(k)).map(([k, v]) => [k, shape(v)]))
  : o;

describe(`legacy /v1/routing-keys (${storesLabel})`, () => {
  test("/v1/routing-keys POST, GET and PATCH answer exactly like /v1/organizations/routing-keys", async () => {
    const cred = await saveCredential(gw, A.token, "openai");
    const body = { label: "legacy", monthly_budget_usd: 5, providers: [{ provider: "openai", credential_id: cred.id, reasoning_effort: "low" }] };
    const viaLegacy = await gw.call("/v1/routing-keys", { method: "POST", token: A.token, body });
    const viaNew = await gw.call("/v1/organizations/routing-keys", { method: "POST", token: A.token, body });
    expect(viaLegacy.status).toBe(200);
    expect(viaLegacy.body.raw_key).toMatch(/^gw_/);
    expect(shape(viaLegacy.body)).toEqual(shape(viaNew.body));

    const listLegacy = await gw.call("/v1/routing-keys?include=lanes", { token: A.rk });
    const listNew = await gw.call("/v1/organizations/routing-keys?include=lanes", { token: A.rk });
    expect(listLegacy.status).toBe(200);
    expect(listLegacy.body).toEqual(listNew.body);

    const p = await gw.call(`/v1/routing-keys?id=${viaLegacy.body.routing_key.id}`, { method: "PATCH", token: A.token, body: { label: "renamed", regenerate: true } });
    expect(p.status).toBe(200);
    expect(p.body.routing_key.label).toBe("renamed");
    expect(p.body.raw_key).toMatch(/^gw_/);
  });

  test("/v1/routing-keys keeps the same auth, gate and validation: 401, 403 for rk_ writes, 402 unpaid, 400 naming the field, 405 method_not_allowed", async () => {
    expect((await gw.call("/v1/routing-keys", { token: null })).status).toBe(401);
    const ro = await gw.call("/v1/routing-keys", { method: "POST", token: A.rk, body: {} });
    expect([ro.status, ro.body.code]).toEqual([403, "read_only_token"]);
    const unpaid = await gw.call("/v1/routing-keys", { token: free.token });
    expect([unpaid.status, unpaid.body.code]).toEqual([402, "payment_required"]);
    const bad = await gw.call("/v1/routing-keys", { method: "POST", token: A.token, body: { plan: "pro" } });
    expect([bad.status, bad.body.code]).toEqual([400, "bad_request"]);
    expect(bad.body.error).toContain("`plan`");
    const m = await gw.call("/v1/routing-keys", { method: "DELETE", token: A.token });
    expect([m.status, m.body.code]).toEqual([405, "method_not_allowed"]);
  });
});

describe(`legacy /v1/bridges (${storesLabel})`, () => {
  test("/v1/bridges POST, GET and DELETE answer exactly like /v1/organizations/bridges", async () => {
    const body = { base_url: bridge.url, token: "legacy-bridge-token", label: "old path" };
    const viaLegacy = await gw.call("/v1/bridges", { method: "POST", token: A.token, body });
    const viaNew = await gw.call("/v1/organizations/bridges", { method: "POST", token: A.token, body });
    expect(viaLegacy.status).toBe(200);
    expect(shape(viaLegacy.body)).toEqual(shape(viaNew.body));
    const listLegacy = await gw.call("/v1/bridges", { token: A.rk });
    expect(listLegacy.body).toEqual((await gw.call("/v1/organizations/bridges", { token: A.rk })).body);
    const del = await gw.call(`/v1/bridges?id=${viaLegacy.body.bridge.id}`, { method: "DELETE", token: A.token });
    expect(del.body).toEqual({ revoked: true });
    expect((await gw.call("/v1/organizations/bridges", { token: A.token })).body.bridges.map((b: any) => b.id)).toEqual([viaNew.body.bridge.id]);
    expect((await gw.call("/v1/bridges", { token: free.token })).status).toBe(402);
    expect((await gw.call("/v1/bridges", { method: "POST", token: A.rk, body })).status).toBe(403);
    expect((await gw.call("/v1/bridges", { method: "PATCH", token: A.token, body })).status).toBe(405);
  });
});

describe(`legacy /api/sub?action= (${storesLabel})`, () => {
  test("/api/sub?action=status (GET), connect (POST) and disconnect (POST or DELETE) answer like GET/POST/DELETE /v1/organizations/sub-session", async () => {
    const a = await createAccount(gw);
    const status0 = await gw.call("/api/sub?action=status", { token: a.token });
    expect(status0.status).toBe(200);
    expect(status0.body).toEqual((await gw.call("/v1/organizations/sub-session", { token: a.token })).body);

    const c = await gw.call("/api/sub?action=connect", { method: "POST", token: a.token, body: { auth_json: authJson() } });
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({ connected: true, status: "connected", sub_host: { provisioned: true, account_status: "active" } });
    expect((await gw.call("/api/sub?action=status", { token: a.token })).body).toEqual((await gw.call("/v1/organizations/sub-session", { token: a.token })).body);

    const d1 = await gw.call("/api/sub?action=disconnect", { method: "POST", token: a.token });
    expect(d1.status).toBe(200);
    expect(d1.body).toEqual({ connected: false, status: "revoked" });
    expect((await gw.call("/v1/organizations/sub-session", { token: a.token })).body.status).toBe("revoked");

    await gw.call("/api/sub?action=connect", { method: "POST", token: a.token, body: { auth_json: authJson() } });
    const d2 = await gw.call("/api/sub?action=disconnect", { method: "DELETE", token: a.token });
    expect(d2.body).toEqual({ connected: false, status: "revoked" });
  });

  test("/api/sub keeps the same auth, gate and validation; a known action with the wrong method is 405, a missing or unknown action is 400", async () => {
    expect((await gw.call("/api/sub?action=status", { token: null })).status).toBe(401);
    const ro = await gw.call("/api/sub?action=connect", { method: "POST", token: A.rk, body: { auth_json: authJson() } });
    expect([ro.status, ro.body.code]).toEqual([403, "read_only_token"]);
    expect((await gw.call("/api/sub?action=status", { token: free.token })).status).toBe(402);
    const bad = await gw.call("/api/sub?action=connect", { method: "POST", token: A.token, body: {} });
    expect([bad.status, bad.body.code]).toEqual([400, "bad_request"]);
    expect(bad.body.error).toContain("`auth_json`");
    const extra = await gw.call("/api/sub?action=status&verbose=1", { token: A.token });
    expect(extra.status).toBe(400);
    expect(extra.body.error).toContain("`verbose`");

    const wrong = await gw.call("/api/sub?action=connect", { token: A.token });
    expect([wrong.status, wrong.body.code]).toEqual([405, "method_not_allowed"]);
    expect((await gw.call("/api/sub?action=status", { method: "DELETE", token: A.token })).status).toBe(405);
    expect((await gw.call("/api/sub?action=status", { method: "PATCH", token: A.token })).status).toBe(405);

    // Names Object.prototype carries are unknown actions too, never a lookup into the prototype.
    for (const q of ["", "?action=", "?action=refresh", "?action=status&action=connect", "?action=valueOf", "?action=__proto__", "?action=constructor"]) {
      const r = await gw.call(`/api/sub${q}`, { token: A.token });
      expect([r.status, r.body.code]).toEqual([400, "bad_request"]);
      expect(r.body.error).toContain("`action`");
    }
    // An unknown action still authenticates first.
    expect((await gw.call("/api/sub?action=refresh", { token: null })).status).toBe(401);
  });
});
