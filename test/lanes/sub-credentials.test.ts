// The sub lane's credentials against the mock backend and auth server over real HTTP: refresh on
// expiry and on 401, one refresh for many concurrent requests, refreshed tokens stored sealed,
// refused refreshes failing the lane with a reason.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadSubAuth } from "../../src/providers/sub/sign-in-store.ts";
import { subFetch, subUrl } from "../../src/providers/sub/client.ts";
import { SUB_OAUTH_CLIENT_ID } from "../../src/providers/sub/credentials.ts";
import { REAL_STORES, startTestGateway, storesLabel } from "../helpers/gateway.ts";
import { connectSub, expireStoredToken, startSubWorld, storedCiphertext, type SubWorld } from "./helpers.ts";

let w: SubWorld;
beforeAll(async () => { w = await startSubWorld(); }, 60_000);
afterAll(async () => { await w.stop(); }, 60_000);

const responsesCall = (sessionId: string, text = "hi") =>
  subFetch(w.gw.ctx, sessionId, {
    method: "POST",
    url: subUrl(w.gw.ctx, "/responses"),
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "gpt-5", input: [{ role: "user", content: text }], store: false }),
  });


describe(`sub credentials (${storesLabel})`, () => {
  test("refresh: an expired access token is refreshed before the call, with the CLI's refresh request shape", async () => {
    const { sessionId, subAccountId, authJson } = await connectSub(w);
    const expired = await expireStoredToken(w, sessionId, subAccountId);
    const before = w.auth.refreshes;
    const sent = w.backend.received.length;

    const res = await responsesCall(sessionId);
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).output[0].content[0].text).toBe("sub answer to: hi");
    expect(w.auth.refreshes).toBe(before + 1);

    const req = w.auth.requests.at(-1)!;
    expect(req.headers["content-type"]).toContain("application/json");
    expect(req.body).toEqual({
      client_id: SUB_OAUTH_CLIENT_ID,
      grant_type: "refresh_token",
      refresh_token: authJson.tokens.refresh_token,
      scope: "openid profile email",
    });
    // The expired token never reached the backend: it was refreshed first.
    const calls = w.backend.received.slice(sent);
    expect(calls.some((r) => r.headers.authorization === `Bearer ${expired}`)).toBe(false);
    const issued = w.auth.latest(subAccountId)!;
    expect(calls.at(-1)!.headers.authorization).toBe(`Bearer ${issued.access_token}`);
    expect(calls.at(-1)!.headers["chatgpt-account-id"]).toBe(subAccountId);
  });

  test("refresh: new tokens are stored encrypted and the rest of the sign-in file is kept", async () => {
    const { sessionId, subAccountId, authJson } = await connectSub(w);
    await expireStoredToken(w, sessionId, subAccountId);
    expect((await responsesCall(sessionId)).status).toBe(200);
    const issued = w.auth.latest(subAccountId)!;
    const stored = (await loadSubAuth(w.gw.ctx, sessionId))!;
    expect(stored.tokens.access_token).toBe(issued.access_token);
    expect(stored.tokens.refresh_token).toBe(issued.refresh_token);
    expect(stored.tokens.account_id).toBe(subAccountId);
    expect(stored.OPENAI_API_KEY).toBeNull();
    expect(Date.parse(stored.last_refresh!)).toBeGreaterThan(Date.parse(authJson.last_refresh));
    const c = (await storedCiphertext(w.gw, sessionId))!;
    expect(c).not.toContain(issued.access_token);
    expect(c).not.toContain(issued.refresh_token);
    expect(w.gw.logs.join("")).not.toContain(issued.access_token);
    expect(w.gw.logs.join("")).not.toContain(issued.refresh_token);
  });

  test("refresh on 401: a token the backend refuses is refreshed and the call retried once", async () => {
    const { sessionId, subAccountId, authJson } = await connectSub(w);
    w.backend.revoke(authJson.tokens.access_token);
    const before = w.auth.refreshes;
    const sent = w.backend.received.length;
    const res = await responsesCall(sessionId, "after 401");
    expect(res.status).toBe(200);
    expect(w.auth.refreshes).toBe(before + 1);
    const calls = w.backend.received.slice(sent);
    expect(calls.map((c) => c.headers.authorization)).toEqual([
      `Bearer ${authJson.tokens.access_token}`,
      `Bearer ${w.auth.latest(subAccountId)!.access_token}`,
    ]);
  });

  test("refresh single-flight: 25 concurrent requests during a refresh cause one refresh", async () => {
    const { sessionId, subAccountId } = await connectSub(w);
    await expireStoredToken(w, sessionId, subAccountId);
    w.auth.setLatency(300);
    const before = w.auth.refreshes;
    const tokensBefore = w.auth.requests.length;
    try {
      const all = await Promise.all(Array.from({ length: 25 }, (_, i) => responsesCall(sessionId, `n${i}`)));
      expect(all.map((r) => r.status)).toEqual(Array(25).fill(200));
    } finally {
      w.auth.setLatency(0);
    }
    expect(w.auth.refreshes).toBe(before + 1);
    expect(w.auth.requests.length).toBe(tokensBefore + 1);
  });

  test("refresh single-flight: 401s on many concurrent requests cause one refresh (rotated refresh tokens stay valid)", async () => {
    const { sessionId, authJson } = await connectSub(w);
    w.backend.revoke(authJson.tokens.access_token);
    w.auth.setLatency(200);
    const before = w.auth.requests.length;
    try {
      const all = await Promise.all(Array.from({ length: 15 }, () => responsesCall(sessionId)));
      expect(all.map((r) => r.status)).toEqual(Array(15).fill(200));
    } finally {
      w.auth.setLatency(0);
    }
    // A second refresh would have reused the rotated refresh token and been refused.
    expect(w.auth.requests.length).toBe(before + 1);
  });

  test("refresh refused by the auth server fails the call with a reason that says to sign in again", async () => {
    const { sessionId, authJson } = await connectSub(w);
    w.backend.revoke(authJson.tokens.access_token);
    w.auth.setFail(401);
    try {
      let err: any = null;
      try { await responsesCall(sessionId); } catch (e) { err = e; }
      expect(err?.name).toBe("GatewayError");
      expect(err.retryable).toBe(true);
      expect(err.message).toContain("could not be refreshed");
      expect(err.message).toContain("sign in again");
      expect(err.message).not.toContain(authJson.tokens.refresh_token);
      // Remembered briefly: the next request does not hit the auth server again.
      const n = w.auth.requests.length;
      await responsesCall(sessionId).catch(() => {});
      expect(w.auth.requests.length).toBe(n);
    } finally {
      w.auth.setFail(null);
    }
  });

  test("CONTRACT §4: a reconnect after a refused refresh serves at once (the refusal belongs to the old sign-in, not the kept session id)", async () => {
    const first = await connectSub(w);
    w.backend.revoke(first.authJson.tokens.access_token);
    w.auth.setFail(401);
    try {
      await expect(responsesCall(first.sessionId)).rejects.toThrow("could not be refreshed");
    } finally {
      w.auth.setFail(null);
    }
    const again = await connectSub(w);
    expect(again.sessionId).toBe(first.sessionId);
    await expireStoredToken(w, again.sessionId, again.subAccountId); // the new sign-in needs a refresh too
    const r = await responsesCall(again.sessionId);
    expect(r.status).toBe(200);
  });

  // Two instances can only share stores with Postgres + Redis; the in-process KV is one instance.
  test.skipIf(!REAL_STORES)("refresh single-flight across two gateway instances sharing Postgres and Redis: one refresh", async () => {
    const second = await startTestGateway({ SUB_API_BASE_URL: w.backend.url, SUB_AUTH_BASE_URL: w.auth.url }, { shareWith: w.gw });
    try {
      const { sessionId, subAccountId } = await connectSub(w);
      await expireStoredToken(w, sessionId, subAccountId);
      w.auth.setLatency(300);
      const before = w.auth.requests.length;
      const call = (ctx: typeof w.gw.ctx) => subFetch(ctx, sessionId, {
        method: "POST", url: subUrl(ctx, "/responses"), headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-5", input: "x" }),
      });
      const all = await Promise.all([...Array.from({ length: 8 }, () => call(w.gw.ctx)), ...Array.from({ length: 8 }, () => call(second.ctx))]);
      expect(all.map((r) => r.status)).toEqual(Array(16).fill(200));
      expect(w.auth.requests.length).toBe(before + 1);
    } finally {
      w.auth.setLatency(0);
      await second.stop();
    }
  }, 60_000);
});
