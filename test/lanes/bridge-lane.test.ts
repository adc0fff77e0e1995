// `bridge` lanes end to end through the gateway (CONTRACT §5): only the bridge's own token goes
// out, unhealthy bridges are skipped within one health interval, the SSRF guard runs again at
// call time, and a redirect is a lane failure.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { bridges } from "../../src/store/db/schema/index.ts";
import { newId } from "../../src/lib/ids.ts";
import { fingerprint } from "../../src/lib/crypto.ts";
import { createAccount, REAL_STORES, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockBridge, type MockBridge } from "../mocks/bridge.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { chat, createKey, eventually, registerBridge, saveCredential } from "./helpers.ts";

let gw: TestGateway;
let account: { id: string; token: string };
let bridge: MockBridge;
let openai: MockUpstream;
let openaiCred: string;

beforeAll(async () => {
  openai = await startMockOpenAI();
  bridge = await startMockBridge();
  gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: openai.url, BRIDGE_HEALTH_INTERVAL_SECONDS: "0.2" });
  account = await createAccount(gw);
  openaiCred = await saveCredential(gw, account.token, "openai", "sk-test-openai-1111111111");
}, 60_000);
afterAll(async () => {
  await gw.stop();
  await bridge.stop();
  await openai.stop();
}, 60_000);

const bridgeLane = (id: string) => ({ provider: "bridge", bridge_instance_id: id });
const openaiLane = () => ({ provider: "openai", credential_id: openaiCred, model: "gpt-4o-mini" });

/** Headers a bridge call may carry: transport headers and the ones the gateway sets. */
const ALLOWED = new Set(["authorization", "content-type", "accept", "content-length", "host", "user-agent", "accept-encoding", "connection"]);

describe(`bridge lane through the gateway (${storesLabel})`, () => {
  test("forwards to POST {base_url}/v1/chat/completions with only the bridge's own bearer token", async () => {
    const id = await registerBridge(gw, account.token, bridge.url, bridge.token);
    const { rawKey } = await createKey(gw, account.token, { providers: [bridgeLane(id)] });
    const res = await gw.call("/v1/chat/completions", {
      token: rawKey,
      body: { model: "coding-agent", messages: [{ role: "user", content: "fix the bug" }] },
      headers: { "x-api-key": "sk-ant-secret-123456789", "openai-organization": "org-1", cookie: "session=abc", "x-custom": "1" },
    });
    expect(res.status).toBe(200);
    expect(res.body.choices[0].message.content).toBe("bridge answer to: fix the bug");
    const got = bridge.completions.at(-1)!;
    expect(got.headers.authorization).toBe(`Bearer ${bridge.token}`);
    for (const h of Object.keys(got.headers)) expect(ALLOWED.has(h)).toBe(true);
    const all = JSON.stringify(got);
    expect(all).not.toContain(rawKey);
    expect(all).not.toContain("sk-ant-secret");
    expect(all).not.toContain("sk-test-openai");
    expect(got.body.messages.at(-1).content).toBe("fix the bug");
    expect(gw.logs.join("")).not.toContain(bridge.token);
  });

  test("streams and Responses-shape requests work through a bridge", async () => {
    const id = await registerBridge(gw, account.token, bridge.url, bridge.token);
    const { rawKey } = await createKey(gw, account.token, { providers: [bridgeLane(id)] });
    const s = await gw.req("/v1/chat/completions", { token: rawKey, body: { model: "m", stream: true, messages: [{ role: "user", content: "go" }] } });
    expect(s.status).toBe(200);
    const text = await s.text();
    const chunks = text.split("\n\n").filter((x) => x.startsWith("data: {")).map((x) => JSON.parse(x.slice(6)));
    expect(chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("")).toBe("bridge answer to: go");
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    const r = await gw.call("/v1/responses", { token: rawKey, body: { model: "m", input: "as responses" } });
    expect(r.status).toBe(200);
    expect(r.body.object).toBe("response");
    expect(r.body.output.find((o: any) => o.type === "message").content[0].text).toBe("bridge answer to: as responses");
    expect(bridge.completions.at(-1)!.body.messages.at(-1).content).toBe("as responses");
  });

  test("a bridge turning unhealthy is skipped within one health interval", async () => {
    const b = await startMockBridge();
    try {
      const id = await registerBridge(gw, account.token, b.url, b.token);
      const { rawKey } = await createKey(gw, account.token, { providers: [bridgeLane(id), openaiLane()] });
      expect((await chat(gw, rawKey, { model: "m", messages: [{ role: "user", content: "while healthy" }] })).status).toBe(200);
      expect(b.completions.length).toBe(1);
      b.setHealthy(false);
      const checksBefore = b.healthChecks;
      await eventually(async () => {
        const list = await gw.call("/v1/organizations/bridges", { token: account.token });
        return list.body.bridges.find((x: any) => x.id === id)?.status === "unhealthy";
      }, 5000, "the health job to mark the bridge unhealthy");
      // One failed check was enough.
      expect(b.healthChecks - checksBefore).toBeGreaterThanOrEqual(1);
      const r = await chat(gw, rawKey, { model: "m", messages: [{ role: "user", content: "after unhealthy" }] });
      expect(r.status).toBe(200);
      expect(b.completions.length).toBe(1);
      expect(openai.received.at(-1)!.body.messages.at(-1).content).toBe("after unhealthy");
      const { rawKey: alone } = await createKey(gw, account.token, { providers: [bridgeLane(id)] });
      const failed = await chat(gw, alone, { model: "m", messages: [{ role: "user", content: "x" }] });
      expect(failed.status).toBe(502);
      expect(failed.body.error.message).toContain("unhealthy");
      // Healthy again: served again.
      b.setHealthy(true);
      await eventually(async () => {
        const list = await gw.call("/v1/organizations/bridges", { token: account.token });
        return list.body.bridges.find((x: any) => x.id === id)?.status === "healthy";
      }, 5000, "the bridge to be healthy again");
      expect((await chat(gw, rawKey, { model: "m", messages: [{ role: "user", content: "back" }] })).status).toBe(200);
      expect(b.completions.length).toBe(2);
    } finally {
      await b.stop();
    }
  });

  test("a redirect from the bridge is a lane failure: not followed, the next lane serves", async () => {
    const b = await startMockBridge();
    try {
      const id = await registerBridge(gw, account.token, b.url, b.token);
      const { rawKey } = await createKey(gw, account.token, { providers: [bridgeLane(id), openaiLane()] });
      b.setRedirect(`${openai.url}/chat/completions`);
      const before = openai.received.length;
      const r = await chat(gw, rawKey, { model: "m", messages: [{ role: "user", content: "redirected?" }] });
      expect(r.status).toBe(200);
      // The next lane served it (with its own key); the bridge's redirect target was never called with the bridge token.
      expect(openai.received.length).toBe(before + 1);
      expect(openai.received.at(-1)!.headers.authorization).toBe("Bearer sk-test-openai-1111111111");
      const { rawKey: alone } = await createKey(gw, account.token, { providers: [bridgeLane(id)] });
      const failed = await chat(gw, alone, { model: "m", messages: [{ role: "user", content: "x" }] });
      expect(failed.status).toBe(502);
      expect(failed.body.error.message).toContain("redirect");
    } finally {
      await b.stop();
    }
  });

  test("a revoked bridge's lane stops serving", async () => {
    const id = await registerBridge(gw, account.token, bridge.url, bridge.token);
    const { rawKey } = await createKey(gw, account.token, { providers: [bridgeLane(id), openaiLane()] });
    expect((await gw.call(`/v1/organizations/bridges?id=${id}`, { method: "DELETE", token: account.token })).status).toBe(200);
    const before = bridge.completions.length;
    const r = await chat(gw, rawKey, { model: "m", messages: [{ role: "user", content: "x" }] });
    expect(r.status).toBe(200);
    expect(bridge.completions.length).toBe(before);
  });
});

describe(`bridge SSRF guard at call time (${storesLabel})`, () => {
  test("ALLOW_PRIVATE_UPSTREAMS=false: a bridge whose host resolves to loopback (localhost) is refused at call time, never contacted", async () => {
    const strict = await startTestGateway({ ALLOW_PRIVATE_UPSTREAMS: "false" });
    const b = await startMockBridge();
    try {
      const acct = await createAccount(strict);
      // Registration refuses such a base_url; a bridge stored before its DNS moved to a private
      // address is what the connect-time check is for, so it is stored directly here.
      const id = newId("brg");
      const base = `http://localhost:${new URL(b.url).port}`;
      expect((await strict.call("/v1/organizations/bridges", { method: "POST", token: acct.token, body: { base_url: base, token: b.token } })).status).toBe(400);
      await strict.ctx.db.insert(bridges).values({
        id, accountId: acct.id, label: "moved", baseUrl: base,
        tokenCiphertext: strict.ctx.secrets.seal(b.token, `bridges:${id}`), tokenFingerprint: fingerprint(b.token), status: "healthy",
      });
      const { rawKey } = await createKey(strict, acct.token, { providers: [bridgeLane(id)] });
      const r = await chat(strict, rawKey, { model: "m", messages: [{ role: "user", content: "x" }] });
      expect(r.status).toBe(502);
      expect(r.body.error.message).toContain("loopback");
      expect(b.received.length).toBe(0);
    } finally {
      await strict.stop();
      await b.stop();
    }
  }, 60_000);

  test.skipIf(!REAL_STORES)("registered on an instance allowing private upstreams, refused by an instance sharing the stores that does not", async () => {
    const b = await startMockBridge();
    const permissive = await startTestGateway({ ALLOW_PRIVATE_UPSTREAMS: "true" });
    const strict = await startTestGateway({ ALLOW_PRIVATE_UPSTREAMS: "false" }, { shareWith: permissive });
    try {
      const acct = await createAccount(permissive);
      const id = await registerBridge(permissive, acct.token, b.url, b.token);
      const { rawKey } = await createKey(permissive, acct.token, { providers: [bridgeLane(id)] });
      expect((await chat(permissive, rawKey, { model: "m", messages: [{ role: "user", content: "ok here" }] })).status).toBe(200);
      const before = b.completions.length;
      const r = await chat(strict, rawKey, { model: "m", messages: [{ role: "user", content: "refused there" }] });
      expect(r.status).toBe(502);
      expect(r.body.error.message).toContain("loopback");
      expect(b.completions.length).toBe(before);
    } finally {
      await strict.stop();
      await permissive.stop();
      await b.stop();
    }
  }, 60_000);
});
