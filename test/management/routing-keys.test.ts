// Routing keys over real HTTP: create with the chain wired in the same call, list (never the raw
// key; `?include=lanes`), PATCH (label, budget, revoke, regenerate, mode, providers with the
// per-lane settings merge), every validation rule of SPEC's body tables, spend from the live
// budget counter, and cache invalidation on every PATCH.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { addToken, createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockSubBackend, type MockSubBackend } from "../mocks/sub-backend.ts";
import { routingKeys, usageRecords } from "../../src/store/db/schema/index.ts";
import { sha256Hex } from "../../src/lib/crypto.ts";
import { reserve, settle } from "../../src/money/counters.ts";
import { API_KEY_PROVIDER_IDS } from "../../src/providers/endpoints.ts";
import { allAdapters } from "../../src/providers/registry.ts";
import { connectSub, invalidationRecorder, registerBridge, saveCredential } from "./helpers.ts";

const RK = "/v1/organizations/routing-keys";

let gw: TestGateway;
let sub: MockSubBackend;
let A: { id: string; token: string; rk: string };
let openaiOld: { id: string }, openaiNew: { id: string }, anthropic: { id: string };
let bridge: { id: string; label: string; status: string };
let session: { id: string };

beforeAll(async () => {
  sub = await startMockSubBackend();
  gw = await startTestGateway({ SUB_API_BASE_URL: sub.url });
  const a = await createAccount(gw);
  A = { ...a, rk: await addToken(gw, a.id, "read_only") };
  openaiOld = await saveCredential(gw, A.token, "openai");
  await Bun.sleep(5); // distinct created_at: "oldest" must be well defined
  openaiNew = await saveCredential(gw, A.token, "openai");
  anthropic = await saveCredential(gw, A.token, "anthropic");
  bridge = await registerBridge(gw, A.token, "http://127.0.0.1:9", undefined, { label: "laptop bridge" }) as any;
  session = await connectSub(gw, A.token);
}, 60_000);
afterAll(async () => {
  await gw?.stop();
  await sub?.stop();
}, 60_000);

const create = (body: unknown, token = A.token) => gw.call(RK, { method: "POST", token, body });
const patch = (id: string, body: unknown, token = A.token) => gw.call(`${RK}?id=${encodeURIComponent(id)}`, { method: "PATCH", token, body });
const openaiLane = (extra: Record<string, unknown> = {}) => ({ provider: "openai", credential_id: openaiOld.id, ...extra });
const subLane = (extra: Record<string, unknown> = {}) => ({ provider: "sub", sub_session_id: session.id, ...extra });
const bridgeLane = (extra: Record<string, unknown> = {}) => ({ provider: "bridge", bridge_instance_id: bridge.id, ...extra });

function expect400(r: { status: number; body: any }, field: string) {
  expect(r.status).toBe(400);
  expect(r.body.code).toBe("bad_request");
  expect(r.body.error).toContain(field);
}

const ROUTING_KEY_FIELDS = [
  "id", "label", "key_prefix", "mode", "classifier_provider", "classifier_model", "classifier_instructions",
  "classifier_credential_id", "monthly_budget_usd", "budget_excludes_seats", "current_month_spend_usd",
  "rpm_limit", "tpm_limit", "max_concurrent_requests", // CONTRACT §8 rate limits
  "cache", // CONTRACT §8 response cache
  "translation", // CONTRACT §9 translation policy
  "session_affinity", // CONTRACT §9 session affinity
  "require_tags", // CONTRACT §9 tags
  "current_month", "last_used_at", "revoked_at", "created_at", "updated_at", "providers",
].sort();
const LANE_FIELDS = [
  "provider", "model", "credential_id", "sub_session_id", "bridge_instance_id", "category_key",
  "category_description", "fallback_to_default_model", "reasoning_effort", "verbosity", "service_tier",
  "cooldown_until", // CONTRACT §9 lane cooldowns: when the lane's cooldown ends, or null
].sort();

describe(`routing keys: create (${storesLabel})`, () => {
  test("POST returns the raw gw_ key once as raw_key (gw_ + 40 random chars); key_prefix is its first 12 characters; only the sha256 is stored", async () => {
    const r = await create({ label: "ci" });
    expect(r.status).toBe(200);
    const raw: string = r.body.raw_key;
    expect(raw).toMatch(/^gw_[A-Za-z0-9]{40}$/);
    expect(r.body.routing_key.key_prefix).toBe(raw.slice(0, 12));
    const [row] = await gw.ctx.db.select().from(routingKeys).where(eq(routingKeys.id, r.body.routing_key.id));
    expect(row!.keyHash).toBe(sha256Hex(raw));
    expect(JSON.stringify(row)).not.toContain(raw);
  });

  test("defaults: label `default`, mode fallback, no budget, budget_excludes_seats true, no lanes, classifier fields null", async () => {
    const r = await create({});
    expect(r.status).toBe(200);
    const k = r.body.routing_key;
    expect(k.label).toBe("default");
    expect(k.mode).toBe("fallback");
    expect(k.monthly_budget_usd).toBeNull();
    expect(k.budget_excludes_seats).toBe(true);
    expect(k.providers).toEqual([]);
    expect([k.classifier_provider, k.classifier_model, k.classifier_instructions, k.classifier_credential_id]).toEqual([null, null, null, null]);
    expect(k.revoked_at).toBeNull();
    expect(k.last_used_at).toBeNull();
  });

  test("a POST without a body creates a default key (every body field is optional)", async () => {
    const r = await gw.call(RK, { method: "POST", token: A.token });
    expect(r.status).toBe(200);
    expect(r.body.routing_key.label).toBe("default");
    expect(r.body.raw_key).toMatch(/^gw_/);
  });

  test("the routing key object has exactly SPEC's Routing key fields, and each lane every Lane field", async () => {
    const r = await create({ providers: [openaiLane()] });
    expect(Object.keys(r.body.routing_key).sort()).toEqual(ROUTING_KEY_FIELDS);
    expect(Object.keys(r.body.routing_key.providers[0]).sort()).toEqual(LANE_FIELDS);
    expect(Object.keys(r.body).sort()).toEqual(["raw_key", "routing_key"]);
  });

  test("providers with mode wires the chain in the same call: sub, bridge and API-key lanes kept in order with every setting", async () => {
    const r = await create({
      label: "fleet",
      mode: "fallback",
      providers: [
        subLane({ model: "flagship", reasoning_effort: "xhigh", verbosity: "low", service_tier: "priority" }),
        bridgeLane({ category_key: "code", category_description: "coding tasks" }),
        openaiLane({ model: "gpt-4o", reasoning_effort: "max", fallback_to_default_model: false }),
        { provider: "anthropic", credential_id: anthropic.id, model: "claude-sonnet-4" },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.body.routing_key.providers).toEqual([
      { provider: "sub", model: "flagship", credential_id: null, sub_session_id: session.id, bridge_instance_id: null, category_key: null, category_description: null, fallback_to_default_model: true, reasoning_effort: "xhigh", verbosity: "low", service_tier: "priority", cooldown_until: null },
      { provider: "bridge", model: null, credential_id: null, sub_session_id: null, bridge_instance_id: bridge.id, category_key: "code", category_description: "coding tasks", fallback_to_default_model: true, reasoning_effort: null, verbosity: null, service_tier: null, cooldown_until: null },
      { provider: "openai", model: "gpt-4o", credential_id: openaiOld.id, sub_session_id: null, bridge_instance_id: null, category_key: null, category_description: null, fallback_to_default_model: false, reasoning_effort: "max", verbosity: null, service_tier: null, cooldown_until: null },
      { provider: "anthropic", model: "claude-sonnet-4", credential_id: anthropic.id, sub_session_id: null, bridge_instance_id: null, category_key: null, category_description: null, fallback_to_default_model: true, reasoning_effort: null, verbosity: null, service_tier: null, cooldown_until: null },
    ]);
    // What GET shows is what was stored.
    const list = await gw.call(RK, { token: A.token });
    expect(list.body.routing_keys.find((k: any) => k.id === r.body.routing_key.id).providers).toEqual(r.body.routing_key.providers);
  });

  test("every one of the 13 API-key providers is a lane kind (with a saved key of that provider)", async () => {
    const other = await createAccount(gw);
    for (const p of API_KEY_PROVIDER_IDS) {
      const c = await saveCredential(gw, other.token, p);
      const r = await create({ providers: [{ provider: p, credential_id: c.id }] }, other.token);
      expect(r.status).toBe(200);
      expect(r.body.routing_key.providers[0].provider).toBe(p);
    }
    expect400(await create({ providers: [{ provider: "acme", credential_id: openaiOld.id }] }), "providers[0].provider");
  });
});

describe(`routing keys: validation rules (${storesLabel})`, () => {
  test("label: at most 60 characters (61 is 400 naming label), empty is 400", async () => {
    expect((await create({ label: "x".repeat(60) })).status).toBe(200);
    expect400(await create({ label: "x".repeat(61) }), "`label`");
    expect400(await create({ label: "   " }), "`label`");
    expect400(await create({ label: 7 }), "`label`");
  });

  test("at most 5 lanes: 6 lanes answer 400 naming providers", async () => {
    expect((await create({ providers: Array.from({ length: 5 }, () => openaiLane()) })).status).toBe(200);
    expect400(await create({ providers: Array.from({ length: 6 }, () => openaiLane()) }), "`providers`");
  });

  test("mode is fallback or classifier; anything else is 400 naming mode", async () => {
    expect400(await create({ mode: "random" }), "`mode`");
  });

  test("classifier mode requires classifier_provider, classifier_model and classifier_instructions (at least 10 characters)", async () => {
    const full = { mode: "classifier", classifier_provider: "openai", classifier_model: "gpt-4o-mini", classifier_instructions: "Pick code for coding." };
    for (const f of ["classifier_provider", "classifier_model", "classifier_instructions"]) {
      const body: Record<string, unknown> = { ...full };
      delete body[f];
      expect400(await create(body), `\`${f}\``);
    }
    expect400(await create({ ...full, classifier_instructions: "too short" }), "`classifier_instructions`");
    const ok = await create({ ...full, providers: [openaiLane({ category_key: "code" })] });
    expect(ok.status).toBe(200);
    expect(ok.body.routing_key.mode).toBe("classifier");
    expect(ok.body.routing_key.classifier_model).toBe("gpt-4o-mini");
  });

  test("classifier_provider must be a provider the caller saved a key for; the credential defaults to the oldest such key", async () => {
    const base = { mode: "classifier", classifier_model: "m", classifier_instructions: "Choose the best lane." };
    expect400(await create({ ...base, classifier_provider: "groq" }), "`classifier_provider`");
    expect400(await create({ ...base, classifier_provider: "sub" }), "`classifier_provider`");
    const r = await create({ ...base, classifier_provider: "openai" });
    expect(r.status).toBe(200);
    expect(r.body.routing_key.classifier_credential_id).toBe(openaiOld.id);
  });

  test("classifier_credential_id, when given, must be the caller's saved key for classifier_provider", async () => {
    const base = { mode: "classifier", classifier_provider: "openai", classifier_model: "m", classifier_instructions: "Choose the best lane." };
    const r = await create({ ...base, classifier_credential_id: openaiNew.id });
    expect(r.status).toBe(200);
    expect(r.body.routing_key.classifier_credential_id).toBe(openaiNew.id);
    expect400(await create({ ...base, classifier_credential_id: anthropic.id }), "`classifier_credential_id`");
    expect400(await create({ ...base, classifier_credential_id: "cred_doesnotexist" }), "`classifier_credential_id`");
  });

  test("monthly_budget_usd: omitted, zero or negative means no budget; a positive value is the cap", async () => {
    expect((await create({ monthly_budget_usd: 0 })).body.routing_key.monthly_budget_usd).toBeNull();
    expect((await create({ monthly_budget_usd: -5 })).body.routing_key.monthly_budget_usd).toBeNull();
    expect((await create({ monthly_budget_usd: 12.5 })).body.routing_key.monthly_budget_usd).toBe(12.5);
    expect400(await create({ monthly_budget_usd: "10" }), "`monthly_budget_usd`");
  });

  test("rate limits (CONTRACT §8): rpm_limit, tpm_limit and max_concurrent_requests are positive integers or null (none, the default), set on create and PATCH, shown on GET", async () => {
    const k = (await create({ rpm_limit: 60, tpm_limit: 10_000, max_concurrent_requests: 4 })).body.routing_key;
    expect([k.rpm_limit, k.tpm_limit, k.max_concurrent_requests]).toEqual([60, 10_000, 4]);
    const none = (await create({})).body.routing_key;
    expect([none.rpm_limit, none.tpm_limit, none.max_concurrent_requests]).toEqual([null, null, null]);
    for (const field of ["rpm_limit", "tpm_limit", "max_concurrent_requests"]) {
      for (const bad of [0, -1, 1.5, "10", 3e9]) expect400(await create({ [field]: bad }), `\`${field}\``);
      expect400(await patch(k.id, { [field]: 0 }), `\`${field}\``);
    }
    const p = (await patch(k.id, { rpm_limit: null, tpm_limit: 500 })).body.routing_key;
    expect([p.rpm_limit, p.tpm_limit, p.max_concurrent_requests]).toEqual([null, 500, 4]);
    const listed = (await gw.call(RK, { token: A.token })).body.routing_keys.find((r: { id: string }) => r.id === k.id);
    expect([listed.rpm_limit, listed.tpm_limit, listed.max_concurrent_requests]).toEqual([null, 500, 4]);
  });

  test("CONTRACT §9: `session_affinity` is {ttl_seconds: 3600} by default on keys with more than one lane, null on one lane; set on create and PATCH, null turns it off, in the OpenAPI document", async () => {
    const two = [openaiLane(), openaiLane({ credential_id: openaiNew.id })];
    const k = (await create({ providers: two })).body.routing_key;
    expect(k.session_affinity).toEqual({ ttl_seconds: 3600 });
    expect((await create({ providers: [openaiLane()] })).body.routing_key.session_affinity).toBeNull();
    expect((await create({})).body.routing_key.session_affinity).toBeNull();
    // The default follows the lanes: a one-lane key that gets a second lane has affinity.
    const one = (await create({ providers: [openaiLane()] })).body.routing_key;
    expect((await patch(one.id, { providers: two })).body.routing_key.session_affinity).toEqual({ ttl_seconds: 3600 });
    expect((await create({ providers: [openaiLane()], session_affinity: { ttl_seconds: 60 } })).body.routing_key.session_affinity).toEqual({ ttl_seconds: 60 });
    for (const bad of [{}, { ttl_seconds: 0 }, { ttl_seconds: 1.5 }, { ttl_seconds: "60" }, { ttl_seconds: 31 * 86400 }, { ttl_seconds: 60, extra: 1 }, 60, "on"]) {
      expect400(await create({ providers: two, session_affinity: bad }), "`session_affinity");
    }
    expect400(await patch(k.id, { session_affinity: { ttl_seconds: -1 } }), "`session_affinity");
    expect((await patch(k.id, { session_affinity: { ttl_seconds: 900 } })).body.routing_key.session_affinity).toEqual({ ttl_seconds: 900 });
    expect((await patch(k.id, { label: "still sticky" })).body.routing_key.session_affinity).toEqual({ ttl_seconds: 900 });
    const off = (await patch(k.id, { session_affinity: null })).body.routing_key;
    expect(off.session_affinity).toBeNull();
    const listed = (await gw.call(RK, { token: A.token })).body.routing_keys.find((r: { id: string }) => r.id === k.id);
    expect(listed.session_affinity).toBeNull();
    const doc = JSON.stringify((await gw.call("/openapi.json")).body.paths["/v1/organizations/routing-keys"]);
    expect(doc).toContain("session_affinity");
  });

  test("CONTRACT §9: `require_tags` is false by default, set on create and PATCH, shown on GET, a boolean or 400, in the OpenAPI document", async () => {
    const k = (await create({ providers: [openaiLane()] })).body.routing_key;
    expect(k.require_tags).toBe(false);
    const strict = (await create({ providers: [openaiLane()], require_tags: true })).body.routing_key;
    expect(strict.require_tags).toBe(true);
    for (const bad of ["true", 1, null]) expect400(await create({ require_tags: bad }), "`require_tags");
    expect((await patch(k.id, { require_tags: true })).body.routing_key.require_tags).toBe(true);
    expect((await patch(k.id, { label: "still strict" })).body.routing_key.require_tags).toBe(true);
    expect((await patch(strict.id, { require_tags: false })).body.require_tags).toBe(false);
    const listed = (await gw.call(RK, { token: A.token })).body.routing_keys;
    expect(listed.find((r: { id: string }) => r.id === k.id).require_tags).toBe(true);
    expect(listed.find((r: { id: string }) => r.id === strict.id).require_tags).toBe(false);
    const doc = JSON.stringify((await gw.call("/openapi.json")).body.paths["/v1/organizations/routing-keys"]);
    expect(doc).toContain("require_tags");
  });

  test("response cache (CONTRACT §8): `cache` is null (off, the default) or {ttl_seconds, shared}, set on create and PATCH, shown on GET, in the OpenAPI document", async () => {
    const k = (await create({ cache: { ttl_seconds: 600 } })).body.routing_key;
    expect(k.cache).toEqual({ ttl_seconds: 600, shared: false });
    expect((await create({})).body.routing_key.cache).toBeNull();
    expect((await create({ cache: { ttl_seconds: 60, shared: true } })).body.routing_key.cache).toEqual({ ttl_seconds: 60, shared: true });
    for (const bad of [{}, { ttl_seconds: 0 }, { ttl_seconds: 1.5 }, { ttl_seconds: "60" }, { ttl_seconds: 31 * 86400 }, { ttl_seconds: 60, shared: "yes" }, { ttl_seconds: 60, extra: 1 }, 60, true]) {
      expect400(await create({ cache: bad }), "`cache");
    }
    expect400(await patch(k.id, { cache: { ttl_seconds: -1 } }), "`cache");
    const p = (await patch(k.id, { cache: { ttl_seconds: 30, shared: true } })).body.routing_key;
    expect(p.cache).toEqual({ ttl_seconds: 30, shared: true });
    expect((await patch(k.id, { label: "still cached" })).body.routing_key.cache).toEqual({ ttl_seconds: 30, shared: true });
    const off = (await patch(k.id, { cache: null })).body.routing_key;
    expect(off.cache).toBeNull();
    const listed = (await gw.call(RK, { token: A.token })).body.routing_keys.find((r: { id: string }) => r.id === k.id);
    expect(listed.cache).toBeNull();
    const doc = (await gw.call("/openapi.json")).body;
    const text = JSON.stringify(doc.paths["/v1/organizations/routing-keys"]);
    expect(text).toContain("ttl_seconds");
    expect(text).toContain("shared");
  });

  test("budget_excludes_seats defaults to true and can be set false", async () => {
    expect((await create({})).body.routing_key.budget_excludes_seats).toBe(true);
    expect((await create({ budget_excludes_seats: false })).body.routing_key.budget_excludes_seats).toBe(false);
    expect400(await create({ budget_excludes_seats: "no" }), "`budget_excludes_seats`");
  });

  test("lane rule: credential_id is required for API-key providers and must be a saved key of THAT provider", async () => {
    expect400(await create({ providers: [{ provider: "openai" }] }), "`providers[0].credential_id`");
    expect400(await create({ providers: [{ provider: "openai", credential_id: anthropic.id }] }), "`providers[0].credential_id`");
    expect400(await create({ providers: [openaiLane(), { provider: "anthropic", credential_id: openaiNew.id }] }), "`providers[1].credential_id`");
  });

  test("lane rule: sub lanes need sub_session_id, bridge lanes need bridge_instance_id, and a lane names only its own kind of id", async () => {
    expect400(await create({ providers: [{ provider: "sub" }] }), "`providers[0].sub_session_id`");
    expect400(await create({ providers: [{ provider: "bridge" }] }), "`providers[0].bridge_instance_id`");
    expect400(await create({ providers: [subLane({ credential_id: openaiOld.id })] }), "`providers[0].credential_id`");
    expect400(await create({ providers: [openaiLane({ bridge_instance_id: bridge.id })] }), "`providers[0].bridge_instance_id`");
    expect400(await create({ providers: [{ provider: "sub", sub_session_id: "sub_unknown" }] }), "`providers[0].sub_session_id`");
    expect400(await create({ providers: [{ provider: "bridge", bridge_instance_id: "brg_unknown" }] }), "`providers[0].bridge_instance_id`");
  });

  test("lane rule: reasoning_effort only on sub and openai lanes, with values none|low|medium|high|xhigh|max", async () => {
    for (const v of ["none", "low", "medium", "high", "xhigh", "max"]) {
      expect((await create({ providers: [openaiLane({ reasoning_effort: v }), subLane({ reasoning_effort: v })] })).status).toBe(200);
    }
    expect400(await create({ providers: [openaiLane({ reasoning_effort: "extreme" })] }), "`providers[0].reasoning_effort`");
    expect400(await create({ providers: [{ provider: "anthropic", credential_id: anthropic.id, reasoning_effort: "high" }] }), "`providers[0].reasoning_effort`");
    expect400(await create({ providers: [bridgeLane({ reasoning_effort: "low" })] }), "`providers[0].reasoning_effort`");
    // null is "no value" and fits any lane.
    expect((await create({ providers: [bridgeLane({ reasoning_effort: null })] })).status).toBe(200);
  });

  test("lane rule: verbosity (low|medium|high) and service_tier (default|priority) only on sub lanes", async () => {
    expect((await create({ providers: [subLane({ verbosity: "high", service_tier: "default" })] })).status).toBe(200);
    expect400(await create({ providers: [subLane({ verbosity: "loud" })] }), "`providers[0].verbosity`");
    expect400(await create({ providers: [subLane({ service_tier: "flex" })] }), "`providers[0].service_tier`");
    expect400(await create({ providers: [openaiLane({ verbosity: "low" })] }), "`providers[0].verbosity`");
    expect400(await create({ providers: [openaiLane({ service_tier: "priority" })] }), "`providers[0].service_tier`");
  });

  test("lane rule: per-lane settings are an adapter capability: every registered provider's lane takes exactly the settings its adapter declares (openai: reasoning_effort; sub: all three)", async () => {
    const declared = (id: string): string[] => [...(allAdapters().find((a) => a.id === id)?.settings ?? [])].sort();
    expect(declared("openai")).toEqual(["reasoning_effort"]);
    expect(declared("sub")).toEqual(["reasoning_effort", "service_tier", "verbosity"]);
    const values = { reasoning_effort: "low", verbosity: "low", service_tier: "default" } as const;
    for (const adapter of allAdapters()) {
      const lane = adapter.kind === "sub" ? subLane() : adapter.kind === "bridge" ? bridgeLane() : { provider: adapter.id, credential_id: (await saveCredential(gw, A.token, adapter.id)).id };
      for (const [setting, value] of Object.entries(values)) {
        const r = await create({ providers: [{ ...lane, [setting]: value }] });
        if (declared(adapter.id).includes(setting)) expect([adapter.id, setting, r.status]).toEqual([adapter.id, setting, 200]);
        else expect400(r, `\`providers[0].${setting}\``);
      }
    }
  });

  test("lane fields outside SPEC's Lane table are refused by name", async () => {
    expect400(await create({ providers: [openaiLane({ api_key: "sk-inline" })] }), "`providers[0].api_key`");
  });
});

describe(`routing keys: list (${storesLabel})`, () => {
  test("GET works with rk_ and sk_ tokens, lists the caller's keys, and never includes a raw key", async () => {
    const made = await create({ label: "listed" });
    for (const token of [A.token, A.rk]) {
      const r = await gw.call(RK, { token });
      expect(r.status).toBe(200);
      expect(Object.keys(r.body)).toEqual(["routing_keys"]);
      const k = r.body.routing_keys.find((x: any) => x.id === made.body.routing_key.id);
      expect(k.label).toBe("listed");
      expect(Object.keys(k).sort()).toEqual(ROUTING_KEY_FIELDS);
      expect(JSON.stringify(r.body)).not.toContain(made.body.raw_key);
      expect(JSON.stringify(r.body)).not.toContain("raw_key");
    }
  });

  test("?include=lanes adds lanes.sub_sessions {id,status}, lanes.bridges {id,label,status}, lanes.credentials {id,provider,label,key_fingerprint}", async () => {
    const r = await gw.call(`${RK}?include=lanes`, { token: A.rk });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body.lanes).sort()).toEqual(["bridges", "credentials", "sub_sessions"]);
    expect(r.body.lanes.sub_sessions).toEqual([{ id: session.id, status: "connected" }]);
    expect(r.body.lanes.bridges).toEqual([{ id: bridge.id, label: "laptop bridge", status: "unknown" }]);
    const c = r.body.lanes.credentials.find((x: any) => x.id === openaiOld.id);
    expect(Object.keys(c).sort()).toEqual(["id", "key_fingerprint", "label", "provider"]);
    expect(c.provider).toBe("openai");
    expect(c.key_fingerprint).toHaveLength(4);
  });

  test("?include= any value other than lanes is 400 naming include; unknown query parameters are 400 naming them", async () => {
    expect400(await gw.call(`${RK}?include=keys`, { token: A.token }), "`include`");
    expect400(await gw.call(`${RK}?include=`, { token: A.token }), "`include`");
    expect400(await gw.call(`${RK}?account_id=acct_x`, { token: A.token }), "`account_id`");
  });
});

describe(`routing keys: PATCH (${storesLabel})`, () => {
  test("PATCH changes label and budget (a non-positive or null budget removes it) and returns the updated routing key", async () => {
    const { routing_key: k } = (await create({ label: "before", monthly_budget_usd: 5 })).body;
    let r = await patch(k.id, { label: "after", monthly_budget_usd: 40 });
    expect(r.status).toBe(200);
    expect(r.body.routing_key.label).toBe("after");
    expect(r.body.routing_key.monthly_budget_usd).toBe(40);
    expect(r.body.raw_key).toBeUndefined();
    expect(Object.keys(r.body.routing_key).sort()).toEqual(ROUTING_KEY_FIELDS);
    // The updated routing key is the answer itself, and also under `routing_key` as in POST.
    const { routing_key, ...top } = r.body;
    expect(top).toEqual(routing_key);
    r = await patch(k.id, { monthly_budget_usd: 0 });
    expect(r.body.routing_key.monthly_budget_usd).toBeNull();
    r = await patch(k.id, { monthly_budget_usd: 3 });
    r = await patch(k.id, { monthly_budget_usd: null });
    expect(r.body.routing_key.monthly_budget_usd).toBeNull();
    expect400(await patch(k.id, { label: "y".repeat(61) }), "`label`");
  });

  test("PATCH revoked true sets revoked_at; revoked false clears it", async () => {
    const { routing_key: k } = (await create({})).body;
    const r1 = await patch(k.id, { revoked: true });
    expect(r1.status).toBe(200);
    expect(typeof r1.body.routing_key.revoked_at).toBe("string");
    const [row] = await gw.ctx.db.select().from(routingKeys).where(eq(routingKeys.id, k.id));
    expect(row!.revokedAt).not.toBeNull();
    const r2 = await patch(k.id, { revoked: false });
    expect(r2.body.routing_key.revoked_at).toBeNull();
  });

  test("PATCH regenerate returns a fresh raw_key once; the old secret's hash is gone and key_prefix follows the new key", async () => {
    const made = (await create({})).body;
    const r = await patch(made.routing_key.id, { regenerate: true });
    expect(r.status).toBe(200);
    expect(r.body.raw_key).toMatch(/^gw_[A-Za-z0-9]{40}$/);
    expect(r.body.raw_key).not.toBe(made.raw_key);
    expect(r.body.routing_key.id).toBe(made.routing_key.id);
    expect(r.body.routing_key.key_prefix).toBe(r.body.raw_key.slice(0, 12));
    const [row] = await gw.ctx.db.select().from(routingKeys).where(eq(routingKeys.id, made.routing_key.id));
    expect(row!.keyHash).toBe(sha256Hex(r.body.raw_key));
    const again = await gw.call(RK, { token: A.token });
    expect(JSON.stringify(again.body)).not.toContain(r.body.raw_key);
  });

  test("PATCH mode and providers: the new chain replaces the old one; classifier mode via PATCH needs the classifier fields", async () => {
    const { routing_key: k } = (await create({ providers: [openaiLane(), bridgeLane()] })).body;
    let r = await patch(k.id, { providers: [subLane()] });
    expect(r.status).toBe(200);
    expect(r.body.routing_key.providers.map((l: any) => l.provider)).toEqual(["sub"]);
    expect400(await patch(k.id, { mode: "classifier" }), "`classifier_provider`");
    r = await patch(k.id, { mode: "classifier", classifier_provider: "anthropic", classifier_model: "claude-haiku", classifier_instructions: "Route coding to sub." });
    expect(r.status).toBe(200);
    expect(r.body.routing_key.mode).toBe("classifier");
    expect(r.body.routing_key.classifier_credential_id).toBe(anthropic.id);
    r = await patch(k.id, { mode: "fallback" });
    expect(r.body.routing_key.mode).toBe("fallback");
    r = await patch(k.id, { providers: [] });
    expect(r.body.routing_key.providers).toEqual([]);
    expect400(await patch(k.id, { providers: Array.from({ length: 6 }, () => subLane()) }), "`providers`");
  });

  test("PATCH per-lane settings merge: a setting left out keeps the key's value for the lane matched by provider plus its credential/session/bridge; null clears it", async () => {
    const { routing_key: k } = (await create({
      providers: [
        subLane({ reasoning_effort: "high", verbosity: "low", service_tier: "priority", fallback_to_default_model: false }),
        openaiLane({ reasoning_effort: "medium" }),
      ],
    })).body;
    const r = await patch(k.id, {
      providers: [
        // Reordered; the openai lane keeps its effort; a lane on the other openai key starts fresh.
        { provider: "openai", credential_id: openaiOld.id, model: "gpt-4.1" },
        { provider: "openai", credential_id: openaiNew.id },
        // verbosity cleared with null, service_tier changed, the rest kept.
        { provider: "sub", sub_session_id: session.id, verbosity: null, service_tier: "default" },
      ],
    });
    expect(r.status).toBe(200);
    const [o1, o2, s] = r.body.routing_key.providers;
    expect(o1).toMatchObject({ provider: "openai", credential_id: openaiOld.id, model: "gpt-4.1", reasoning_effort: "medium", fallback_to_default_model: true });
    expect(o2).toMatchObject({ provider: "openai", credential_id: openaiNew.id, reasoning_effort: null, fallback_to_default_model: true });
    expect(s).toMatchObject({ provider: "sub", reasoning_effort: "high", verbosity: null, service_tier: "default", fallback_to_default_model: false });
    // null on fallback_to_default_model clears it back to the default (true).
    const r2 = await patch(k.id, { providers: [{ provider: "sub", sub_session_id: session.id, fallback_to_default_model: null, reasoning_effort: null }] });
    expect(r2.body.routing_key.providers[0]).toMatchObject({ fallback_to_default_model: true, reasoning_effort: null, verbosity: null, service_tier: "default" });
  });

  test("PATCH needs ?id= of one of the caller's keys: missing id or unknown id is 400 bad_request", async () => {
    expect400(await gw.call(RK, { method: "PATCH", token: A.token, body: { label: "x" } }), "`id`");
    expect400(await patch("rkey_doesnotexist", { label: "x" }), "No routing key");
  });

  test("PATCH body fields outside the PATCH table are refused by name (no mass assignment of spend, prefix or account)", async () => {
    const { routing_key: k } = (await create({})).body;
    for (const f of ["current_month_spend_usd", "key_prefix", "account_id", "id", "revoked_at"]) {
      expect400(await patch(k.id, { [f]: f === "current_month_spend_usd" ? 0 : "x" }), `\`${f}\``);
    }
    expect400(await patch(k.id, { revoked: "yes" }), "`revoked`");
    expect400(await patch(k.id, { regenerate: 1 }), "`regenerate`");
  });
});

describe(`routing keys: invalidation and spend (${storesLabel})`, () => {
  test("revoke, regenerate and any other PATCH publish a key invalidation for the key's old hash to every instance sharing the stores", async () => {
    const rec = await invalidationRecorder(gw);
    try {
      const made = (await create({})).body;
      const h1 = sha256Hex(made.raw_key);
      await patch(made.routing_key.id, { label: "renamed" });
      await rec.waitFor((m) => m.kind === "key" && m.hash === h1);
      rec.seen.length = 0;
      await patch(made.routing_key.id, { revoked: true });
      await rec.waitFor((m) => m.kind === "key" && m.hash === h1);
      rec.seen.length = 0;
      const regen = (await patch(made.routing_key.id, { regenerate: true, revoked: false })).body;
      await rec.waitFor((m) => m.kind === "key" && m.hash === h1);
      rec.seen.length = 0;
      await patch(made.routing_key.id, { revoked: true });
      await rec.waitFor((m) => m.kind === "key" && m.hash === sha256Hex(regen.raw_key));
    } finally {
      await rec.stop();
    }
  });

  test("current_month_spend_usd and current_month come from the live budget counter (in-flight reservations and settled cost)", async () => {
    const { routing_key: k } = (await create({ monthly_budget_usd: 10 })).body;
    expect(k.current_month_spend_usd).toBe(0);
    expect(k.current_month).toBe(new Date().toISOString().slice(0, 7));
    const key = { id: k.id, monthlyBudgetUsd: 10, budgetExcludesSeats: true };
    const res = await reserve(gw.ctx, key, 0.75);
    expect(res).not.toBeNull();
    let list = (await gw.call(RK, { token: A.token })).body.routing_keys;
    expect(list.find((x: any) => x.id === k.id).current_month_spend_usd).toBeCloseTo(0.75, 9);
    await settle(gw.ctx, key, res!, 1.25);
    list = (await gw.call(RK, { token: A.token })).body.routing_keys;
    expect(list.find((x: any) => x.id === k.id).current_month_spend_usd).toBeCloseTo(1.25, 9);
  });

  test("a key without a live counter shows this month's recorded spend (the counter is rebuilt from usage records)", async () => {
    // A key written before any counter existed (e.g. Redis was emptied): rows only in Postgres.
    const id = `rkey_seed${crypto.randomUUID().slice(0, 8)}`;
    await gw.ctx.db.insert(routingKeys).values({ id, accountId: A.id, label: "seeded", keyHash: sha256Hex(id), keyPrefix: "gw_seeded000" });
    await gw.ctx.db.insert(usageRecords).values([
      { accountId: A.id, routingKeyId: id, endpoint: "chat", provider: "openai", status: 200, outcome: "ok", costUsd: 0.5 },
      { accountId: A.id, routingKeyId: id, endpoint: "chat", provider: "sub", status: 200, outcome: "ok", costUsd: 2, seat: true },
    ]);
    const list = (await gw.call(RK, { token: A.token })).body.routing_keys;
    // Seat traffic is left out while budget_excludes_seats is true.
    expect(list.find((x: any) => x.id === id).current_month_spend_usd).toBeCloseTo(0.5, 9);
  });
});
