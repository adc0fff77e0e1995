// Isolation between accounts: account A can neither see nor reference account B's routing keys,
// saved keys, bridges, sub session or usage, and the answer for B's id is the same as for an id
// that does not exist, so nothing tells A that B's object exists.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockSubBackend, type MockSubBackend } from "../mocks/sub-backend.ts";
import { startMockBridge, type MockBridge } from "../mocks/bridge.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { connectSub, registerBridge, saveCredential } from "./helpers.ts";

let gw: TestGateway;
let sub: MockSubBackend;
let bridgeMock: MockBridge;

interface World {
  id: string;
  token: string;
  cred: { id: string };
  bridge: { id: string };
  session: { id: string };
  key: { id: string };
}
let A: World;
let B: World;

async function world(): Promise<World> {
  const a = await createAccount(gw);
  const cred = await saveCredential(gw, a.token, "openai");
  const bridge = await registerBridge(gw, a.token, bridgeMock.url);
  const session = await connectSub(gw, a.token);
  const key = (await gw.call("/v1/organizations/routing-keys", {
    method: "POST", token: a.token,
    body: { providers: [{ provider: "openai", credential_id: cred.id }, { provider: "bridge", bridge_instance_id: bridge.id }, { provider: "sub", sub_session_id: session.id }] },
  })).body.routing_key;
  await gw.ctx.db.insert(usageRecords).values({ accountId: a.id, routingKeyId: key.id, endpoint: "chat", provider: "openai", status: 200, outcome: "ok", promptTokens: 11, costUsd: 0.01 });
  return { ...a, cred, bridge, session, key };
}

beforeAll(async () => {
  sub = await startMockSubBackend();
  bridgeMock = await startMockBridge();
  gw = await startTestGateway({ SUB_API_BASE_URL: sub.url });
  A = await world();
  B = await world();
}, 60_000);
afterAll(async () => {
  await gw?.stop();
  await sub?.stop();
  await bridgeMock?.stop();
}, 60_000);

/** The error message with the given id replaced, to compare answers for B's id and a made-up one. */
const msg = (r: { body: any }, id: string) => String(r.body.error).replaceAll(id, "<id>");

describe(`cross-account isolation (${storesLabel})`, () => {
  test("A's lists show none of B's routing keys, saved keys, bridges, wireable lanes, sub session or usage", async () => {
    const everything = [
      await gw.call("/v1/organizations/routing-keys?include=lanes", { token: A.token }),
      await gw.call("/v1/organizations/credentials", { token: A.token }),
      await gw.call("/v1/organizations/bridges", { token: A.token }),
      await gw.call("/v1/organizations/sub-session", { token: A.token }),
      await gw.call("/v1/organizations/usage", { token: A.token }),
    ];
    const text = JSON.stringify(everything.map((r) => r.body));
    for (const id of [B.id, B.cred.id, B.bridge.id, B.session.id, B.key.id]) expect(text).not.toContain(id);
    for (const id of [A.cred.id, A.bridge.id, A.session.id, A.key.id]) expect(text).toContain(id);
    expect(everything[4]!.body.totals.requests).toBe(1);
  });

  test("A cannot wire B's saved key, bridge or sub session into a lane: 400 bad_request, same answer as for an id that does not exist", async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ provider: "openai", credential_id: B.cred.id }, B.cred.id],
      [{ provider: "bridge", bridge_instance_id: B.bridge.id }, B.bridge.id],
      [{ provider: "sub", sub_session_id: B.session.id }, B.session.id],
    ];
    for (const [lane, foreignId] of cases) {
      const made = "x_doesnotexist00000000";
      const ref = Object.keys(lane).find((k) => k !== "provider")!;
      const foreign = await gw.call("/v1/organizations/routing-keys", { method: "POST", token: A.token, body: { providers: [lane] } });
      const missing = await gw.call("/v1/organizations/routing-keys", { method: "POST", token: A.token, body: { providers: [{ ...lane, [ref]: made }] } });
      expect([foreign.status, foreign.body.code]).toEqual([400, "bad_request"]);
      expect(msg(foreign, foreignId)).toBe(msg(missing, made));
      // PATCH of A's own key with B's id is refused the same way.
      const p = await gw.call(`/v1/organizations/routing-keys?id=${A.key.id}`, { method: "PATCH", token: A.token, body: { providers: [lane] } });
      expect([p.status, p.body.code]).toEqual([400, "bad_request"]);
    }
    const keys = (await gw.call("/v1/organizations/routing-keys", { token: A.token })).body.routing_keys;
    expect(keys.find((k: any) => k.id === A.key.id).providers.map((l: any) => l.provider)).toEqual(["openai", "bridge", "sub"]);
  });

  test("A cannot use B's saved key as classifier credential", async () => {
    const body = { mode: "classifier", classifier_provider: "openai", classifier_model: "m", classifier_instructions: "Pick the best lane." };
    const foreign = await gw.call("/v1/organizations/routing-keys", { method: "POST", token: A.token, body: { ...body, classifier_credential_id: B.cred.id } });
    const missing = await gw.call("/v1/organizations/routing-keys", { method: "POST", token: A.token, body: { ...body, classifier_credential_id: "cred_doesnotexist" } });
    expect([foreign.status, foreign.body.code]).toEqual([400, "bad_request"]);
    expect(foreign.body.error).toBe(missing.body.error);
  });

  test("A cannot PATCH B's routing key, delete B's saved key or revoke B's bridge: 400 as for a missing id, and B's objects are untouched", async () => {
    const pk = await gw.call(`/v1/organizations/routing-keys?id=${B.key.id}`, { method: "PATCH", token: A.token, body: { revoked: true } });
    const pkMissing = await gw.call(`/v1/organizations/routing-keys?id=rkey_doesnotexist`, { method: "PATCH", token: A.token, body: { revoked: true } });
    expect([pk.status, pk.body.code]).toEqual([400, "bad_request"]);
    expect(msg(pk, B.key.id)).toBe(msg(pkMissing, "rkey_doesnotexist"));

    const dc = await gw.call(`/v1/organizations/credentials?id=${B.cred.id}`, { method: "DELETE", token: A.token });
    const dcMissing = await gw.call(`/v1/organizations/credentials?id=cred_doesnotexist`, { method: "DELETE", token: A.token });
    expect([dc.status, dc.body.code]).toEqual([400, "bad_request"]);
    expect(msg(dc, B.cred.id)).toBe(msg(dcMissing, "cred_doesnotexist"));

    const db = await gw.call(`/v1/organizations/bridges?id=${B.bridge.id}`, { method: "DELETE", token: A.token });
    const dbMissing = await gw.call(`/v1/organizations/bridges?id=brg_doesnotexist`, { method: "DELETE", token: A.token });
    expect([db.status, db.body.code]).toEqual([400, "bad_request"]);
    expect(msg(db, B.bridge.id)).toBe(msg(dbMissing, "brg_doesnotexist"));

    // A disconnecting its own sign-in leaves B's alone.
    await gw.call("/v1/organizations/sub-session", { method: "DELETE", token: A.token });

    const bKeys = (await gw.call("/v1/organizations/routing-keys", { token: B.token })).body.routing_keys;
    expect(bKeys.find((k: any) => k.id === B.key.id).revoked_at).toBeNull();
    expect((await gw.call("/v1/organizations/credentials", { token: B.token })).body.credentials.map((c: any) => c.id)).toEqual([B.cred.id]);
    expect((await gw.call("/v1/organizations/bridges", { token: B.token })).body.bridges.map((b: any) => b.id)).toEqual([B.bridge.id]);
    const bSub = (await gw.call("/v1/organizations/sub-session", { token: B.token })).body;
    expect([bSub.id, bSub.status]).toEqual([B.session.id, "connected"]);
  });
});
