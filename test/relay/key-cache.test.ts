// Key resolution cached in-process: no Postgres on a warm key, dropped at once on revoke,
// regenerate and PATCH, on this instance and on every other instance sharing Redis.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createAccount, REAL_STORES, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "./fixtures.ts";

async function waitFor(cond: () => Promise<boolean>, ms = 3000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await Bun.sleep(20);
  }
  return false;
}

describe(`key cache (${storesLabel})`, () => {
  let gw: TestGateway;
  let mock: MockUpstream;

  beforeAll(async () => {
    mock = await startMockOpenAI();
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: mock.url });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await mock?.stop();
  }, 60_000);

  test("a warm non-streaming request runs without any Postgres query", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 50 });
    const q = gw.ctx.services.usage;
    // Warm up: the key is loaded, the month's budget counter is seeded.
    for (let i = 0; i < 2; i++) expect((await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() })).status).toBe(200);
    // The query counter is per gateway: its background jobs (webhook outbox, alerts, expiry sweep,
    // bridge health) are stopped for the window, so only the request's own queries count.
    for (const j of gw.jobs) await j.stop();
    await Bun.sleep(50);
    await q.flush();
    const release = q.hold();
    try {
      const before = gw.ctx.dbh.queries();
      const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
      expect(r.status).toBe(200);
      await Bun.sleep(50); // the settle after the answer must not reach Postgres either
      expect(gw.ctx.dbh.queries()).toBe(before);
      // Its usage record waits for the batch (with Redis: in the usage stream, not in this process).
      if (!REAL_STORES) expect(gw.ctx.services.usageQueue.depth()).toBe(1);
    } finally {
      release();
      for (const j of gw.jobs) j.start();
    }
    await q.flush();
  });

  test("key invalidation: revoke, regenerate and PATCH through management apply at once", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
    expect((await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() })).status).toBe(200);

    // PATCH the lanes: the next request uses the new chain (a lane model to fall back to) without waiting.
    const p = await gw.call(`/v1/organizations/routing-keys?id=${key.id}`, { method: "PATCH", token: acct.token, body: { providers: [{ provider: "openai", credential_id: cred.id, model: "gpt-4.1" }] } });
    expect(p.status).toBe(200);
    expect((await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ mock: { unknown_model: ["gpt-4o-mini"] } }) })).status).toBe(200);
    expect(mock.received.at(-1)!.body.model).toBe("gpt-4.1");

    // Regenerate: the old secret stops working at once, the new one works.
    const g = await gw.call(`/v1/organizations/routing-keys?id=${key.id}`, { method: "PATCH", token: acct.token, body: { regenerate: true } });
    expect(g.status).toBe(200);
    expect((await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() })).body.error.code).toBe("invalid_api_key");
    const fresh = g.body.raw_key as string;
    expect((await gw.call("/v1/chat/completions", { token: fresh, body: chatBody() })).status).toBe(200);

    // Revoke.
    expect((await gw.call(`/v1/organizations/routing-keys?id=${key.id}`, { method: "PATCH", token: acct.token, body: { revoked: true } })).status).toBe(200);
    const r = await gw.call("/v1/chat/completions", { token: fresh, body: chatBody() });
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe("invalid_api_key");
  });

  test("account invalidation drops every key of the account (a deleted credential is seen at once)", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const k1 = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
    const k2 = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
    for (const k of [k1, k2]) expect((await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody() })).status).toBe(200);
    const d = await gw.call(`/v1/organizations/credentials?id=${cred.id}`, { method: "DELETE", token: acct.token });
    expect(d.status).toBe(200);
    for (const k of [k1, k2]) {
      const r = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody() });
      expect(r.status).toBe(502); // the only lane has no key any more: it fails over, and nothing is left
      const s = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody({ stream: true }) });
      expect(s.status).toBe(400);
      expect(s.body.error.code).toBe("no_credential");
    }
  });

  test.if(REAL_STORES)("invalidation reaches another gateway instance sharing Redis", async () => {
    const gw2 = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: mock.url }, { shareWith: gw });
    try {
      const acct = await createAccount(gw);
      const cred = await addCredential(gw, acct.id, "openai");
      const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
      expect((await gw2.call("/v1/chat/completions", { token: key.raw, body: chatBody() })).status).toBe(200);
      // Cached on instance 2: the second request reads no key from Postgres. Counted at the key
      // cache's loader, not as all of the instance's queries (its background jobs run their own).
      const kc = gw2.ctx.services.keyCache;
      const load = kc.load;
      let loads = 0;
      kc.load = (hash) => { loads++; return load(hash); };
      try {
        expect((await gw2.call("/v1/chat/completions", { token: key.raw, body: chatBody() })).status).toBe(200);
      } finally {
        kc.load = load;
      }
      expect(loads).toBe(0);
      // Revoked through instance 1's management API.
      expect((await gw.call(`/v1/organizations/routing-keys?id=${key.id}`, { method: "PATCH", token: acct.token, body: { revoked: true } })).status).toBe(200);
      const refused = await waitFor(async () => (await gw2.call("/v1/chat/completions", { token: key.raw, body: chatBody() })).status === 401, 2000);
      expect(refused).toBe(true);
    } finally {
      await gw2.stop();
    }
  });
});
