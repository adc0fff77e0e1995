// Subscription sign-in (SPEC "Sub session", CONTRACT §4) against a mock subscription backend on
// loopback: validation of auth_json, sealed storage, provisioning against GET /models, expiry,
// reconnect keeping the id, revoke, and the store functions the sub lane uses.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { addToken, createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockSubBackend, type MockSubBackend } from "../mocks/sub-backend.ts";
import { makeAuthJson, startMockSubAuth, type MockSubAuth } from "../mocks/sub-auth.ts";
import { subSessions } from "../../src/store/db/schema/index.ts";
import { loadSubAuth, saveSubAuth } from "../../src/providers/sub/sign-in-store.ts";
import type { SecretBox } from "../../src/secrets.ts";
import { authJson, connectSub, invalidationRecorder } from "./helpers.ts";

const SS = "/v1/organizations/sub-session";
let gw: TestGateway;
let sub: MockSubBackend;
let subAuth: MockSubAuth;

beforeAll(async () => {
  sub = await startMockSubBackend();
  subAuth = await startMockSubAuth({ backend: sub });
  gw = await startTestGateway({ SUB_API_BASE_URL: sub.url, SUB_AUTH_BASE_URL: subAuth.url });
}, 60_000);
afterAll(async () => {
  await gw?.stop();
  await sub?.stop();
  await subAuth?.stop();
}, 60_000);

const SESSION_FIELDS = ["id", "connected", "status", "connected_at", "last_used_at", "expires_at", "last_error", "sub_host"].sort();
const rowOf = async (id: string) => (await gw.ctx.db.select().from(subSessions).where(eq(subSessions.id, id)))[0]!;

function expect400(r: { status: number; body: any }, field: string) {
  expect(r.status).toBe(400);
  expect(r.body.code).toBe("bad_request");
  expect(r.body.error).toContain(field);
}

describe(`sub session: connect and read (${storesLabel})`, () => {
  test("GET before any sign-in answers {connected: false, status: \"pending\"} with null fields", async () => {
    const a = await createAccount(gw);
    const r = await gw.call(SS, { token: a.token });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ id: null, connected: false, status: "pending", connected_at: null, last_used_at: null, expires_at: null, last_error: null, sub_host: null });
  });

  test("POST with a valid auth_json answers the sub session object: connected, with id and sub_host {provisioned: true, account_status: \"active\"}", async () => {
    const a = await createAccount(gw);
    const r = await gw.call(SS, { method: "POST", token: a.token, body: { auth_json: authJson(), source_path: "~/.codex/auth.json" } });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(SESSION_FIELDS);
    expect(r.body).toMatchObject({ connected: true, status: "connected", last_used_at: null, expires_at: null, last_error: null, sub_host: { provisioned: true, account_status: "active" } });
    expect(r.body.id).toMatch(/^sub_/);
    expect(Number.isNaN(Date.parse(r.body.connected_at))).toBe(false);
    const got = await gw.call(SS, { token: (await addToken(gw, a.id, "read_only")) });
    expect(got.body).toEqual(r.body);
  });

  test("provisioning calls GET {SUB_API_BASE_URL}/models with Bearer <access_token> and chatgpt-account-id <tokens.account_id>", async () => {
    const a = await createAccount(gw);
    const auth = authJson("prov");
    const before = sub.received.length;
    await connectSub(gw, a.token, auth);
    const calls = sub.received.slice(before).filter((x) => x.path === "/models");
    expect(calls).toHaveLength(1);
    expect(calls[0]!.method).toBe("GET");
    expect(calls[0]!.headers.authorization).toBe(`Bearer ${auth.tokens.access_token}`);
    expect(calls[0]!.headers["chatgpt-account-id"]).toBe(auth.tokens.account_id);
  });

  test("auth_json given as the file's JSON text is accepted the same way", async () => {
    const a = await createAccount(gw);
    const r = await gw.call(SS, { method: "POST", token: a.token, body: { auth_json: JSON.stringify(authJson()) } });
    expect(r.status).toBe(200);
    expect(r.body.status).toBe("connected");
  });

  test("auth_json validation: missing, not an object, or without tokens.access_token / tokens.refresh_token strings is 400 bad_request naming the field", async () => {
    const a = await createAccount(gw);
    const post = (body: unknown) => gw.call(SS, { method: "POST", token: a.token, body });
    expect400(await post({}), "`auth_json`");
    expect400(await post({ auth_json: null }), "`auth_json`");
    expect400(await post({ auth_json: [1, 2] }), "`auth_json`");
    expect400(await post({ auth_json: "{not json" }), "`auth_json`");
    expect400(await post({ auth_json: {} }), "`auth_json.tokens`");
    const good = authJson();
    expect400(await post({ auth_json: { ...good, tokens: { ...good.tokens, access_token: undefined } } }), "`auth_json.tokens.access_token`");
    expect400(await post({ auth_json: { ...good, tokens: { ...good.tokens, refresh_token: 42 } } }), "`auth_json.tokens.refresh_token`");
    expect400(await post({ auth_json: good, plan: "pro" }), "`plan`");
    expect400(await post({ auth_json: good, ttl_seconds: 0 }), "`ttl_seconds`");
    expect400(await post({ auth_json: good, ttl_seconds: -60 }), "`ttl_seconds`");
    expect400(await post({ auth_json: good, ttl_seconds: "3600" }), "`ttl_seconds`");
    // Nothing was stored by the refused attempts.
    expect((await gw.call(SS, { token: a.token })).body.status).toBe("pending");
  });

  test("auth_json is stored AES-256-GCM encrypted bound to the row (aad sub_sessions:<id>); loadSubAuth decrypts it and saveSubAuth re-seals refreshed tokens", async () => {
    const a = await createAccount(gw);
    const auth = authJson("sealed");
    const s = await connectSub(gw, a.token, auth);
    const row = await rowOf(s.id);
    expect(row.authCiphertext).not.toContain(auth.tokens.access_token);
    expect(row.authCiphertext).not.toContain(auth.tokens.refresh_token);
    expect(JSON.parse(gw.ctx.secrets.open(row.authCiphertext!, `sub_sessions:${s.id}`))).toEqual(auth);
    expect(() => gw.ctx.secrets.open(row.authCiphertext!, "sub_sessions:sub_other")).toThrow();
    expect(await loadSubAuth(gw.ctx, s.id)).toEqual(auth);
    const refreshed = { ...auth, tokens: { ...auth.tokens, access_token: "at-new-after-refresh", refresh_token: "rt-new-after-refresh" } };
    expect(await saveSubAuth(gw.ctx, s.id, refreshed)).toBe(true);
    expect(await loadSubAuth(gw.ctx, s.id)).toEqual(refreshed);
    expect((await rowOf(s.id)).authCiphertext).not.toContain("at-new-after-refresh");
    expect(await loadSubAuth(gw.ctx, "sub_unknown")).toBeNull();
  });

  test("an encryption failure answers 500 encrypt_failed and stores nothing", async () => {
    const a = await createAccount(gw);
    const real = gw.ctx.secrets;
    const failing: SecretBox = { available: true, open: real.open, seal: () => { throw new Error("cipher failure"); } };
    gw.ctx.secrets = failing;
    try {
      const r = await gw.call(SS, { method: "POST", token: a.token, body: { auth_json: authJson() } });
      expect(r.status).toBe(500);
      expect(r.body.code).toBe("encrypt_failed");
    } finally {
      gw.ctx.secrets = real;
    }
    expect(await gw.ctx.db.select().from(subSessions).where(eq(subSessions.accountId, a.id))).toEqual([]);
  });
});

describe(`sub session: provisioning failures (${storesLabel})`, () => {
  test("a backend that refuses the sign-in (401) leaves status connected with sub_host.provisioned false and last_error saying why", async () => {
    const a = await createAccount(gw);
    sub.setFail(401);
    try {
      const s = await connectSub(gw, a.token);
      expect(s.status).toBe("connected");
      expect(s.connected).toBe(true);
      expect(s.sub_host).toEqual({ provisioned: false, account_status: "unauthorized" });
      expect(s.last_error).toContain("401");
    } finally {
      sub.setFail(null);
    }
  });

  test("a backend error (500), an empty model list, or an unreachable backend each give provisioned false with a last_error", async () => {
    const a = await createAccount(gw);
    sub.setFail(500);
    try {
      const s = await connectSub(gw, a.token);
      expect(s.sub_host.provisioned).toBe(false);
      expect(s.last_error).toContain("500");
    } finally {
      sub.setFail(null);
    }
    sub.setModels([]);
    try {
      const s = await connectSub(gw, a.token);
      expect(s.sub_host.provisioned).toBe(false);
      expect(s.last_error).toContain("no models");
    } finally {
      sub.setModels(["gpt-5.1-codex", "gpt-5.1-codex-mini"]);
    }
    const down = await startMockSubBackend();
    const deadUrl = down.url;
    await down.stop();
    const saved = gw.ctx.config.SUB_API_BASE_URL;
    gw.ctx.config.SUB_API_BASE_URL = deadUrl;
    try {
      const s = await connectSub(gw, a.token);
      expect(s.sub_host.provisioned).toBe(false);
      expect(s.last_error).toContain("could not be reached");
    } finally {
      gw.ctx.config.SUB_API_BASE_URL = saved;
    }
    // Once the backend answers again, connecting again provisions.
    expect((await connectSub(gw, a.token)).sub_host).toEqual({ provisioned: true, account_status: "active" });
  });
});

describe(`sub session: the live catalog on request (${storesLabel})`, () => {
  test("CONTRACT §4 live catalog: GET ?include=models adds the session's models with the tier each alias resolves to; without a session the list is empty; other include values are 400", async () => {
    const a = await createAccount(gw);
    const none = await gw.call(`${SS}?include=models`, { token: a.token });
    expect(none.body).toMatchObject({ connected: false, models: [], models_error: null });
    await connectSub(gw, a.token);
    const r = await gw.call(`${SS}?include=models`, { token: await addToken(gw, a.id, "read_only") });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ connected: true, models_error: null });
    expect(r.body.models).toEqual([{ id: "gpt-5.1-codex", tier: "flagship" }, { id: "gpt-5.1-codex-mini", tier: "mini" }]);
    // Without the parameter the object is exactly SPEC's.
    expect(Object.keys((await gw.call(SS, { token: a.token })).body).sort()).toEqual(SESSION_FIELDS);
    expect400(await gw.call(`${SS}?include=lanes`, { token: a.token }), "`include`");
  });
});

describe(`sub session: provisioning through the lane's token refresh (${storesLabel})`, () => {
  test("a sign-in whose access token already expired but whose refresh token is valid provisions: the catalog check refreshes first and the new tokens are stored encrypted", async () => {
    const a = await createAccount(gw);
    const { accountId, authJson: auth } = makeAuthJson({ backend: sub, auth: subAuth, accessTtl: -60 });
    const sent = sub.received.length;
    const s = await connectSub(gw, a.token, auth);
    expect(s).toMatchObject({ status: "connected", last_error: null, sub_host: { provisioned: true, account_status: "active" } });
    const issued = subAuth.latest(accountId)!;
    expect(issued.access_token).not.toBe(auth.tokens.access_token);
    const calls = sub.received.slice(sent).filter((x) => x.path === "/models");
    expect(calls.map((x) => x.headers.authorization)).toEqual([`Bearer ${issued.access_token}`]);
    const stored = (await loadSubAuth(gw.ctx, s.id))!;
    expect(stored.tokens).toMatchObject({ access_token: issued.access_token, refresh_token: issued.refresh_token, account_id: accountId });
    const row = await rowOf(s.id);
    expect(row.provisioned).toBe(true);
    expect(row.authCiphertext).not.toContain(issued.access_token);
    expect(row.authCiphertext).not.toContain(issued.refresh_token);
    expect(gw.logs.join("")).not.toContain(issued.refresh_token);
    expect((await gw.call(SS, { token: a.token })).body).toEqual(s);
  });

  test("a sign-in whose access token expired and whose refresh is refused is stored with provisioned false, account_status unauthorized and a last_error that says to sign in again", async () => {
    const a = await createAccount(gw);
    const { authJson: auth } = makeAuthJson({ backend: sub, accessTtl: -60 }); // refresh token unknown to the auth server
    const s = await connectSub(gw, a.token, auth);
    expect(s).toMatchObject({ status: "connected", sub_host: { provisioned: false, account_status: "unauthorized" } });
    expect(s.last_error).toContain("sign in again");
    expect(s.last_error).not.toContain(auth.tokens.refresh_token);
    expect(await loadSubAuth(gw.ctx, s.id)).toEqual(auth);
  });
});

describe(`sub session: lifecycle (${storesLabel})`, () => {
  test("ttl_seconds sets expires_at, and the session reads as expired (not connected) after it", async () => {
    const a = await createAccount(gw);
    const t0 = Date.now();
    const s = await connectSub(gw, a.token, authJson(), { ttl_seconds: 1 });
    const exp = Date.parse(s.expires_at);
    expect(exp).toBeGreaterThanOrEqual(t0 + 900);
    expect(exp).toBeLessThanOrEqual(Date.now() + 1100);
    expect(s.status).toBe("connected");
    await Bun.sleep(Math.max(0, exp - Date.now()) + 50);
    const r = await gw.call(SS, { token: a.token });
    expect(r.body).toMatchObject({ id: s.id, connected: false, status: "expired" });
    const lanes = await gw.call("/v1/organizations/routing-keys?include=lanes", { token: a.token });
    expect(lanes.body.lanes.sub_sessions).toEqual([{ id: s.id, status: "expired" }]);
  });

  test("CONTRACT §4: connecting again keeps the session's id and replaces the stored sign-in in place; an account invalidation is published", async () => {
    const a = await createAccount(gw);
    const rec = await invalidationRecorder(gw);
    try {
      const firstAuth = authJson("first");
      const first = await connectSub(gw, a.token, firstAuth);
      await rec.waitFor((m) => m.kind === "account" && m.accountId === a.id);
      rec.seen.length = 0;
      const secondAuth = authJson("second");
      const second = await connectSub(gw, a.token, secondAuth, { source_path: "/home/agent/.codex/auth.json" });
      await rec.waitFor((m) => m.kind === "account" && m.accountId === a.id);
      expect(second.id).toBe(first.id);
      expect(second).toMatchObject({ connected: true, status: "connected" });
      const rows = await gw.ctx.db.select().from(subSessions).where(eq(subSessions.accountId, a.id));
      expect(rows.map((r) => r.id)).toEqual([first.id]);
      expect(rows[0]!.revokedAt).toBeNull();
      expect(rows[0]!.sourcePath).toBe("/home/agent/.codex/auth.json");
      expect(await loadSubAuth(gw.ctx, first.id)).toEqual(secondAuth);
      expect((await gw.call(SS, { token: a.token })).body.id).toBe(first.id);
      const lanes = await gw.call("/v1/organizations/routing-keys?include=lanes", { token: a.token });
      expect(lanes.body.lanes.sub_sessions).toEqual([{ id: first.id, status: "connected" }]);
      // Lanes can keep naming the session.
      const k = await gw.call("/v1/organizations/routing-keys", { method: "POST", token: a.token, body: { providers: [{ provider: "sub", sub_session_id: first.id }] } });
      expect(k.status).toBe(200);
    } finally {
      await rec.stop();
    }
  });

  test("CONTRACT §4: only DELETE ends the session; a POST after it starts a new session with a new id", async () => {
    const a = await createAccount(gw);
    const first = await connectSub(gw, a.token);
    expect((await gw.call(SS, { method: "DELETE", token: a.token })).status).toBe(200);
    const second = await connectSub(gw, a.token);
    expect(second.id).not.toBe(first.id);
    expect((await rowOf(first.id)).status).toBe("revoked");
    const k = await gw.call("/v1/organizations/routing-keys", { method: "POST", token: a.token, body: { providers: [{ provider: "sub", sub_session_id: first.id }] } });
    expect400(k, "`providers[0].sub_session_id`");
  });

  test("at most one live sub session per account, even when several connects race: they all answer the same id", async () => {
    const a = await createAccount(gw);
    const results = await Promise.all(Array.from({ length: 5 }, () => gw.call(SS, { method: "POST", token: a.token, body: { auth_json: authJson() } })));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    const rows = await gw.ctx.db.select().from(subSessions).where(eq(subSessions.accountId, a.id));
    expect(rows).toHaveLength(1);
    expect(rows[0]!.revokedAt).toBeNull();
    expect(rows[0]!.authCiphertext).not.toBeNull();
  });

  test("DELETE answers {connected: false, status: \"revoked\"}: the sign-in is erased, GET shows revoked, the lanes stop resolving, an invalidation is published", async () => {
    const a = await createAccount(gw);
    const rk = await addToken(gw, a.id, "read_only");
    const s = await connectSub(gw, a.token);
    expect((await gw.call(SS, { method: "DELETE", token: rk })).status).toBe(403);
    const rec = await invalidationRecorder(gw);
    try {
      const r = await gw.call(SS, { method: "DELETE", token: a.token });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ connected: false, status: "revoked" });
      await rec.waitFor((m) => m.kind === "account" && m.accountId === a.id);
    } finally {
      await rec.stop();
    }
    const row = await rowOf(s.id);
    expect(row.authCiphertext).toBeNull();
    expect(row.status).toBe("revoked");
    expect(await loadSubAuth(gw.ctx, s.id)).toBeNull();
    // A token refresh finishing after the disconnect must not bring the sign-in back.
    expect(await saveSubAuth(gw.ctx, s.id, authJson())).toBe(false);
    expect((await rowOf(s.id)).authCiphertext).toBeNull();
    const got = await gw.call(SS, { token: a.token });
    expect(got.body).toMatchObject({ id: s.id, connected: false, status: "revoked" });
    const lanes = await gw.call("/v1/organizations/routing-keys?include=lanes", { token: a.token });
    expect(lanes.body.lanes.sub_sessions).toEqual([]);
    // DELETE with nothing connected is still a plain answer.
    expect((await gw.call(SS, { method: "DELETE", token: a.token })).body).toEqual({ connected: false, status: "revoked" });
  });
});
