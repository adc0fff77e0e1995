// Bridges over real HTTP (SPEC "Bridge", CONTRACT §5 and §8): registration rules, encrypted token,
// list and revoke, and the health-check job against a mock bridge on loopback.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { addToken, createAccount, REAL_STORES, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockBridge, type MockBridge } from "../mocks/bridge.ts";
import { bridges } from "../../src/store/db/schema/index.ts";
import { openBridgeToken } from "../../src/management/bridges/service.ts";
import { checkBridges, probeBridge } from "../../src/jobs/bridge-health.ts";
import type { Ctx } from "../../src/context.ts";
import { eventually, invalidationRecorder, registerBridge } from "./helpers.ts";

const BR = "/v1/organizations/bridges";
let gw: TestGateway;
let mock: MockBridge;
let A: { id: string; token: string; rk: string };

beforeAll(async () => {
  mock = await startMockBridge();
  // A short health interval so the job's own schedule is observable; private upstreams allowed
  // (the harness default) because the mock bridge listens on loopback.
  gw = await startTestGateway({ BRIDGE_HEALTH_INTERVAL_SECONDS: "0.3" });
  const a = await createAccount(gw);
  A = { ...a, rk: await addToken(gw, a.id, "read_only") };
}, 60_000);
afterAll(async () => {
  await gw?.stop();
  await mock?.stop();
}, 60_000);

const post = (body: unknown, token = A.token) => gw.call(BR, { method: "POST", token, body });
const BRIDGE_FIELDS = [
  "id", "label", "kind", "base_url", "token_fingerprint", "cloud_provider", "cloud_instance_id", "region",
  "status", "plan_tier", "last_health_at", "last_error", "created_at", "updated_at",
].sort();

function expect400(r: { status: number; body: any }, field: string) {
  expect(r.status).toBe(400);
  expect(r.body.code).toBe("bad_request");
  expect(r.body.error).toContain(field);
}

describe(`bridges: register, list, revoke (${storesLabel})`, () => {
  test("POST answers {bridge: Bridge} with every SPEC field: kind coding_agent, status unknown, generic default label, token fingerprint = last 4", async () => {
    const token = `tok-${crypto.randomUUID()}`;
    const r = await post({ base_url: `${mock.url}/`, token });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body)).toEqual(["bridge"]);
    const b = r.body.bridge;
    expect(Object.keys(b).sort()).toEqual(BRIDGE_FIELDS);
    expect(b).toMatchObject({
      label: "Coding agent bridge", kind: "coding_agent", base_url: mock.url, token_fingerprint: token.slice(-4),
      status: "unknown", cloud_provider: null, cloud_instance_id: null, region: null, plan_tier: null, last_health_at: null, last_error: null,
    });
    expect(JSON.stringify(r.body)).not.toContain(token);
  });

  test("status `provisioning` is kept when sent; bookkeeping fields cloud_provider, cloud_instance_id, region, plan_tier are stored", async () => {
    const b = await registerBridge(gw, A.token, mock.url, undefined, {
      status: "provisioning", label: "gpu box", cloud_provider: "hetzner", cloud_instance_id: "i-123", region: "fsn1", plan_tier: "cx22",
    });
    expect(b).toMatchObject({ status: "provisioning", label: "gpu box", cloud_provider: "hetzner", cloud_instance_id: "i-123", region: "fsn1", plan_tier: "cx22" });
    expect400(await post({ base_url: mock.url, token: "abcdefgh", status: "healthy" }), "`status`");
  });

  test("base_url must be an http:// or https:// URL (required; no other scheme, no user:password)", async () => {
    expect400(await post({ token: "abcdefgh" }), "`base_url`");
    for (const u of ["not a url", "ftp://bridge.example.com", "file:///etc/passwd", "javascript:alert(1)", "http://user:pw@127.0.0.1:9"]) {
      expect400(await post({ base_url: u, token: "abcdefgh" }), "`base_url`");
    }
  });

  test("token is required and at least 8 characters (the error never echoes it); label at most 80 characters", async () => {
    expect400(await post({ base_url: mock.url }), "`token`");
    const short = await post({ base_url: mock.url, token: "seven77" });
    expect400(short, "`token`");
    expect(short.body.error).not.toContain("seven77");
    expect((await post({ base_url: mock.url, token: "abcdefgh", label: "l".repeat(80) })).status).toBe(200);
    expect400(await post({ base_url: mock.url, token: "abcdefgh", label: "l".repeat(81) }), "`label`");
    expect400(await post({ base_url: mock.url, token: "abcdefgh", account_id: "acct_x" }), "`account_id`");
  });

  test("the token is stored AES-256-GCM encrypted, bound to its row (aad bridges:<id>)", async () => {
    const token = `secret-bridge-${crypto.randomUUID()}`;
    const b = await registerBridge(gw, A.token, mock.url, token);
    const [row] = await gw.ctx.db.select().from(bridges).where(eq(bridges.id, b.id));
    expect(row!.tokenCiphertext).not.toContain(token);
    expect(gw.ctx.secrets.open(row!.tokenCiphertext, `bridges:${b.id}`)).toBe(token);
    expect(() => gw.ctx.secrets.open(row!.tokenCiphertext, "bridges:brg_other")).toThrow();
    expect(await openBridgeToken(gw.ctx, A.id, b.id)).toEqual({ baseUrl: mock.url, token });
  });

  test("GET (rk_ or sk_) answers {bridges: [...]}; DELETE ?id= answers {revoked: true}, the bridge leaves the list, its token is erased and an account invalidation is published", async () => {
    const rec = await invalidationRecorder(gw);
    try {
      const b = await registerBridge(gw, A.token, mock.url);
      for (const token of [A.token, A.rk]) {
        const r = await gw.call(BR, { token });
        expect(r.status).toBe(200);
        expect(r.body.bridges.some((x: any) => x.id === b.id)).toBe(true);
      }
      expect((await gw.call(`${BR}?id=${b.id}`, { method: "DELETE", token: A.rk })).status).toBe(403);
      const del = await gw.call(`${BR}?id=${b.id}`, { method: "DELETE", token: A.token });
      expect(del.status).toBe(200);
      expect(del.body).toEqual({ revoked: true });
      const after = await gw.call(BR, { token: A.token });
      expect(after.body.bridges.some((x: any) => x.id === b.id)).toBe(false);
      const [row] = await gw.ctx.db.select().from(bridges).where(eq(bridges.id, b.id));
      expect(row!.revokedAt).not.toBeNull();
      expect(row!.tokenCiphertext).toBe("");
      expect(await openBridgeToken(gw.ctx, A.id, b.id)).toBeNull();
      await rec.waitFor((m) => m.kind === "account" && m.accountId === A.id);
      expect400(await gw.call(`${BR}?id=${b.id}`, { method: "DELETE", token: A.token }), "No bridge");
      expect400(await gw.call(BR, { method: "DELETE", token: A.token }), "`id`");
    } finally {
      await rec.stop();
    }
  });

  test("a revoked bridge can no longer be wired into a routing key", async () => {
    const b = await registerBridge(gw, A.token, mock.url);
    await gw.call(`${BR}?id=${b.id}`, { method: "DELETE", token: A.token });
    const r = await gw.call("/v1/organizations/routing-keys", { method: "POST", token: A.token, body: { providers: [{ provider: "bridge", bridge_instance_id: b.id }] } });
    expect400(r, "`providers[0].bridge_instance_id`");
  });
});

describe(`bridges: health checks (${storesLabel})`, () => {
  const statusOf = async (id: string) => (await gw.call(BR, { token: A.token })).body.bridges.find((x: any) => x.id === id);

  test("health check: GET {base_url}/health answering 2xx sets `healthy` with last_health_at and no last_error", async () => {
    mock.setHealthy(true);
    const b = await registerBridge(gw, A.token, mock.url);
    const before = mock.healthChecks;
    await checkBridges(gw.ctx);
    expect(mock.healthChecks).toBeGreaterThan(before);
    const s = await statusOf(b.id);
    expect(s.status).toBe("healthy");
    expect(s.last_error).toBeNull();
    expect(Number.isNaN(Date.parse(s.last_health_at))).toBe(false);
    expect(mock.received.filter((r) => r.path === "/health").every((r) => r.method === "GET")).toBe(true);
  });

  test("health check: a non-2xx answer or an unreachable bridge sets `unhealthy` with last_error; a status change publishes an account invalidation", async () => {
    const rec = await invalidationRecorder(gw);
    try {
      mock.setHealthy(true);
      const b = await registerBridge(gw, A.token, mock.url);
      await checkBridges(gw.ctx);
      expect((await statusOf(b.id)).status).toBe("healthy");
      rec.seen.length = 0;
      mock.setHealthy(false);
      await checkBridges(gw.ctx);
      const s = await statusOf(b.id);
      expect(s.status).toBe("unhealthy");
      expect(s.last_error).toContain("503");
      await rec.waitFor((m) => m.kind === "account" && m.accountId === A.id);

      // Nothing listens on a port that was just freed: connection refused.
      const gone = await startMockBridge();
      const url = gone.url;
      await gone.stop();
      const dead = await registerBridge(gw, A.token, url);
      await checkBridges(gw.ctx);
      const d = await statusOf(dead.id);
      expect(d.status).toBe("unhealthy");
      expect(typeof d.last_error).toBe("string");
    } finally {
      mock.setHealthy(true);
      await rec.stop();
    }
  });

  test("health check applies the SSRF guard at connect time: with private upstreams refused, a loopback bridge is marked unhealthy and never called", async () => {
    const strict: Ctx = { ...gw.ctx, config: { ...gw.ctx.config, ALLOW_PRIVATE_UPSTREAMS: false } };
    const before = mock.healthChecks;
    const r = await probeBridge(strict, mock.url, 2000);
    expect(r.status).toBe("unhealthy");
    expect(r.error).toContain("loopback");
    expect(mock.healthChecks).toBe(before);
  });

  test("the bridge-health job is registered at boot and runs by itself every BRIDGE_HEALTH_INTERVAL_SECONDS", async () => {
    expect(gw.jobs.map((j) => j.name)).toContain("bridge-health");
    mock.setHealthy(true);
    const b = await registerBridge(gw, A.token, mock.url);
    await eventually(async () => (await statusOf(b.id)).status === "healthy");
    mock.setHealthy(false);
    const s = await eventually(async () => {
      const x = await statusOf(b.id);
      return x.status === "unhealthy" ? x : null;
    });
    expect(s.last_error).toContain("503");
    mock.setHealthy(true);
  });

  test("revoked bridges are not health-checked", async () => {
    const lone = await startMockBridge();
    try {
      const b = await registerBridge(gw, A.token, lone.url);
      await gw.call(`${BR}?id=${b.id}`, { method: "DELETE", token: A.token });
      const before = lone.healthChecks;
      await checkBridges(gw.ctx);
      expect(lone.healthChecks).toBe(before);
    } finally {
      await lone.stop();
    }
  });
});

describe("bridge health across a fleet", () => {
  test.if(REAL_STORES)("CONTRACT §5 health checks: two instances on the same stores probe a bridge about once per BRIDGE_HEALTH_INTERVAL_SECONDS between them, not once each", async () => {
    const second = await startTestGateway({ BRIDGE_HEALTH_INTERVAL_SECONDS: "0.3" }, { shareWith: gw });
    const lone = await startMockBridge();
    try {
      await registerBridge(gw, A.token, lone.url);
      const before = lone.healthChecks;
      const started = Date.now();
      await new Promise((r) => setTimeout(r, 3000));
      const intervals = (Date.now() - started) / 300;
      const probes = lone.healthChecks - before;
      expect(probes).toBeGreaterThan(intervals * 0.5);
      expect(probes).toBeLessThan(intervals * 1.5);
    } finally {
      await second.stop();
      await lone.stop();
    }
  }, 30_000);
});
