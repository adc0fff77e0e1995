// CONTRACT §9 "Tags" through a test gateway: `x-gateway-tags` (or `metadata.tags`) is checked on
// every inference route, answered 400 in the client protocol's error shape when malformed, and
// written on each usage record of the request (streamed or not, chat, Responses, Messages,
// embeddings, Gemini, /blitz and /blitz/jobs); a `metadata.tags` array never reaches a vendor that
// would refuse it; require_tags on a key answers an untagged request 400; the records API
// shows and filters by tags, groups?by=tag adds up to the tagged records, and tags never become
// metric labels.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { and, eq, sql } from "drizzle-orm";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { storesLabel } from "../helpers/gateway.ts";
import { jobWhenEnded } from "../helpers/blitz-jobs.ts";
import { startRelayWorld, usageRows, type RelayWorld } from "../helpers/relay-world.ts";

let w: RelayWorld<"openai" | "anthropic" | "google">;
const keys = {} as Record<"openai" | "anthropic" | "google", { raw: string; id: string; key: any }>;
let strictKey: { raw: string; id: string; key: any };

const ANTHROPIC = { "anthropic-version": "2023-06-01" };
const unique = (s: string) => `${s}-${Math.random().toString(36).slice(2, 8)}`;

async function createKey(provider: "openai" | "anthropic" | "google", extra: Record<string, unknown> = {}) {
  const r = await w.gw.call("/v1/organizations/routing-keys", {
    method: "POST", token: w.acct.token,
    body: { label: `tags ${provider}`, providers: [{ provider, credential_id: w.cred[provider].id }], ...extra },
  });
  expect(r.status).toBe(200);
  return { raw: r.body.raw_key as string, id: r.body.routing_key.id as string, key: r.body.routing_key };
}

beforeAll(async () => {
  w = await startRelayWorld({ providers: ["openai", "anthropic", "google"] });
  for (const p of ["openai", "anthropic", "google"] as const) keys[p] = await createKey(p);
  strictKey = await createKey("openai", { require_tags: true });
}, 60_000);
afterAll(async () => {
  await w?.stop();
}, 60_000);

const recordsOf = (requestId: string) => usageRows(w.gw, eq(usageRecords.requestId, requestId));
const ridOf = (r: { headers: Headers }) => r.headers.get("x-request-id")!;

type Shape = "chat" | "responses" | "anthropic";
const PATH: Record<Shape, string> = { chat: "/v1/chat/completions", responses: "/v1/responses", anthropic: "/v1/messages" };
function bodyFor(shape: Shape, model: string, stream: boolean, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const text = "Say something short about tags.";
  if (shape === "chat") return { model, messages: [{ role: "user", content: text }], stream, ...(stream ? { stream_options: { include_usage: true } } : {}), ...extra };
  if (shape === "responses") return { model, input: text, stream, ...extra };
  return { model, max_tokens: 100, messages: [{ role: "user", content: text }], stream, ...extra };
}

describe(`CONTRACT §9: tags on inference (${storesLabel})`, () => {
  const cases: Array<{ shape: Shape; lane: "openai" | "anthropic"; model: string }> = [
    { shape: "chat", lane: "openai", model: "gpt-4o-mini" },
    { shape: "responses", lane: "openai", model: "gpt-4o-mini" },
    { shape: "anthropic", lane: "anthropic", model: "claude-3-5-haiku-latest" },
    { shape: "chat", lane: "anthropic", model: "claude-3-5-haiku-latest" },
    { shape: "anthropic", lane: "openai", model: "gpt-4o-mini" },
  ];
  for (const c of cases) {
    for (const stream of [false, true]) {
      test(`CONTRACT §9: a ${stream ? "streamed" : "non-streamed"} ${c.shape} request on an ${c.lane} lane: x-gateway-tags written on its records`, async () => {
        const r = await w.gw.call(PATH[c.shape], { token: keys[c.lane].raw, body: bodyFor(c.shape, c.model, stream), headers: { ...(c.shape === "anthropic" ? ANTHROPIC : {}), "x-gateway-tags": "team-a, run:1,team-a" } });
        expect(r.status).toBe(200);
        const rows = await recordsOf(ridOf(r));
        expect(rows.length).toBeGreaterThan(0);
        for (const row of rows) expect(row.tags).toEqual(["team-a", "run:1"]);
      });
    }
  }

  test("CONTRACT §9: a response-cache hit's record carries the hit request's own tags; the tags do not split the cache", async () => {
    const cached = await createKey("openai", { cache: { ttl_seconds: 300 } });
    const body = bodyFor("chat", "gpt-4o-mini", false);
    const miss = await w.gw.call(PATH.chat, { token: cached.raw, body, headers: { "x-gateway-tags": "first" } });
    expect(miss.headers.get("x-cache")).toBe("MISS");
    const hit = await w.gw.call(PATH.chat, { token: cached.raw, body: { ...body, metadata: { tags: ["second"] } } });
    expect(hit.headers.get("x-cache")).toBe("HIT");
    expect((await recordsOf(ridOf(hit))).map((x) => [x.outcome, x.tags])).toEqual([["cache_hit", ["second"]]]);
    expect((await recordsOf(ridOf(miss))).map((x) => x.tags)).toEqual([["first"]]);
  });

  test("CONTRACT §9: an untagged request's records hold no tags", async () => {
    const r = await w.gw.call(PATH.chat, { token: keys.openai.raw, body: bodyFor("chat", "gpt-4o-mini", false) });
    expect(r.status).toBe(200);
    const rows = await recordsOf(ridOf(r));
    expect(rows.map((x) => x.tags)).toEqual([null]);
  });

  test("CONTRACT §9: embeddings (translated to a Gemini lane) and Gemini's generateContent and streamGenerateContent write their tags", async () => {
    const emb = await w.gw.call("/v1/embeddings", { token: keys.google.raw, body: { model: "gemini-embedding-001", input: ["a", "b"] }, headers: { "x-gateway-tags": "emb" } });
    expect(emb.status).toBe(200);
    expect((await recordsOf(ridOf(emb))).map((x) => [x.endpoint, x.tags])).toEqual([["embeddings", ["emb"]]]);
    const hello = { contents: [{ role: "user", parts: [{ text: "hello" }] }] };
    const gen = await w.gw.call("/v1beta/models/gemini-2.5-flash:generateContent", { token: null, body: hello, headers: { "x-goog-api-key": keys.google.raw, "x-gateway-tags": "gem" } });
    expect(gen.status).toBe(200);
    expect((await recordsOf(ridOf(gen))).map((x) => x.tags)).toEqual([["gem"]]);
    const streamed = await w.gw.call("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", { token: null, body: hello, headers: { "x-goog-api-key": keys.google.raw, "x-gateway-tags": "gem,sse" } });
    expect(streamed.status).toBe(200);
    expect((await recordsOf(ridOf(streamed))).map((x) => x.tags)).toEqual([["gem", "sse"]]);
  });

  test("CONTRACT §9: a malformed header is 400 naming x-gateway-tags in each protocol's own error shape, and nothing goes upstream", async () => {
    const sentBefore = w.up.openai.received.length + w.up.anthropic.received.length + w.up.google.received.length;
    const eleven = Array.from({ length: 11 }, (_, i) => `t${i}`).join(",");
    for (const bad of [eleven, "x".repeat(65), "bad tag", "a,,b", ""]) {
      const chat = await w.gw.call(PATH.chat, { token: keys.openai.raw, body: bodyFor("chat", "gpt-4o-mini", false), headers: { "x-gateway-tags": bad } });
      expect(chat.status).toBe(400);
      expect(chat.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_tags" });
      expect(chat.body.error.message).toContain("x-gateway-tags");
    }
    const msg = await w.gw.call(PATH.anthropic, { token: keys.anthropic.raw, body: bodyFor("anthropic", "claude-3-5-haiku-latest", false), headers: { ...ANTHROPIC, "x-gateway-tags": "no spaces allowed" } });
    expect(msg.status).toBe(400);
    expect(msg.body.type).toBe("error");
    expect(msg.body.error.type).toBe("invalid_request_error");
    expect(msg.body.error.message).toContain("x-gateway-tags");
    const gem = await w.gw.call("/v1beta/models/gemini-2.5-flash:generateContent", { token: null, body: { contents: [{ role: "user", parts: [{ text: "x" }] }] }, headers: { "x-goog-api-key": keys.google.raw, "x-gateway-tags": "é" } });
    expect(gem.status).toBe(400);
    expect(gem.body.error).toMatchObject({ code: 400, status: "INVALID_ARGUMENT" });
    expect(gem.body.error.message).toContain("x-gateway-tags");
    const blitz = await w.gw.call("/blitz", { token: keys.openai.raw, body: { model: "gpt-4o-mini", prompts: ["a"] }, headers: { "x-gateway-tags": "a/b" } });
    expect(blitz.status).toBe(400);
    expect(blitz.body.code).toBe("invalid_tags");
    expect(w.up.openai.received.length + w.up.anthropic.received.length + w.up.google.received.length).toBe(sentBefore);
  });

  test("CONTRACT §9: metadata.tags is read without the header and never reaches OpenAI (whose metadata holds strings) or Anthropic (user_id only)", async () => {
    const chat = await w.gw.call(PATH.chat, { token: keys.openai.raw, body: bodyFor("chat", "gpt-4o-mini", false, { metadata: { tags: ["from-body", "x:1"], purpose: "demo" } }) });
    expect(chat.status).toBe(200);
    expect((await recordsOf(ridOf(chat))).map((x) => x.tags)).toEqual([["from-body", "x:1"]]);
    expect(w.up.openai.received.at(-1)!.body.metadata).toEqual({ purpose: "demo" });

    const resp = await w.gw.call(PATH.responses, { token: keys.openai.raw, body: bodyFor("responses", "gpt-4o-mini", true, { metadata: { tags: ["resp"] } }) });
    expect(resp.status).toBe(200);
    expect((await recordsOf(ridOf(resp))).map((x) => x.tags)).toEqual([["resp"]]);
    expect(w.up.openai.received.at(-1)!.body.metadata).toBeUndefined();

    const msg = await w.gw.call(PATH.anthropic, { token: keys.anthropic.raw, body: bodyFor("anthropic", "claude-3-5-haiku-latest", false, { metadata: { user_id: "u-1", tags: ["claude"] } }), headers: ANTHROPIC });
    expect(msg.status).toBe(200);
    expect((await recordsOf(ridOf(msg))).map((x) => x.tags)).toEqual([["claude"]]);
    const sent = w.up.anthropic.received.at(-1)!;
    expect(sent.rejected).toBeNull();
    expect(sent.body.metadata).toEqual({ user_id: "u-1" });
  });

  test("CONTRACT §9: the header wins over metadata.tags; a bad metadata.tags alone is 400 naming it; a string metadata.tags is OpenAI's own and goes upstream", async () => {
    const both = await w.gw.call(PATH.chat, { token: keys.openai.raw, body: bodyFor("chat", "gpt-4o-mini", false, { metadata: { tags: ["body"] } }), headers: { "x-gateway-tags": "header" } });
    expect(both.status).toBe(200);
    expect((await recordsOf(ridOf(both))).map((x) => x.tags)).toEqual([["header"]]);
    expect(w.up.openai.received.at(-1)!.body.metadata).toBeUndefined();

    const bad = await w.gw.call(PATH.chat, { token: keys.openai.raw, body: bodyFor("chat", "gpt-4o-mini", false, { metadata: { tags: ["ok", 7] } }) });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_tags", param: "metadata.tags" });

    const own = await w.gw.call(PATH.chat, { token: keys.openai.raw, body: bodyFor("chat", "gpt-4o-mini", false, { metadata: { tags: "vendor-string" } }) });
    expect(own.status).toBe(200);
    expect(w.up.openai.received.at(-1)!.body.metadata).toEqual({ tags: "vendor-string" });
    expect((await recordsOf(ridOf(own))).map((x) => x.tags)).toEqual([null]);
  });

  test("CONTRACT §9: require_tags: the key answers an untagged request 400 tags_required, a tagged one is served; set and read through the API", async () => {
    expect(strictKey.key.require_tags).toBe(true);
    expect(keys.openai.key.require_tags).toBe(false);
    const listed = await w.gw.call("/v1/organizations/routing-keys", { token: w.acct.token });
    expect(listed.status).toBe(200);
    const rows = listed.body.routing_keys as any[];
    expect(rows.find((k) => k.id === strictKey.id)?.require_tags).toBe(true);
    expect(rows.find((k) => k.id === keys.openai.id)?.require_tags).toBe(false);

    const untagged = await w.gw.call(PATH.chat, { token: strictKey.raw, body: bodyFor("chat", "gpt-4o-mini", false) });
    expect(untagged.status).toBe(400);
    expect(untagged.body.error).toMatchObject({ type: "invalid_request_error", code: "tags_required" });
    expect(untagged.body.error.message).toContain("x-gateway-tags");
    const emptyBody = await w.gw.call(PATH.chat, { token: strictKey.raw, body: bodyFor("chat", "gpt-4o-mini", false, { metadata: { tags: [] } }) });
    expect(emptyBody.status).toBe(400);
    const blitz = await w.gw.call("/blitz", { token: strictKey.raw, body: { model: "gpt-4o-mini", prompts: ["a"] } });
    expect(blitz.status).toBe(400);
    expect(blitz.body.code).toBe("tags_required");
    const tagged = await w.gw.call(PATH.chat, { token: strictKey.raw, body: bodyFor("chat", "gpt-4o-mini", false), headers: { "x-gateway-tags": "ok" } });
    expect(tagged.status).toBe(200);
    const viaBody = await w.gw.call(PATH.chat, { token: strictKey.raw, body: bodyFor("chat", "gpt-4o-mini", false, { metadata: { tags: ["ok"] } }) });
    expect(viaBody.status).toBe(200);

    const patched = await w.gw.call(`/v1/organizations/routing-keys?id=${strictKey.id}`, { method: "PATCH", token: w.acct.token, body: { require_tags: false } });
    expect(patched.status).toBe(200);
    expect(patched.body.routing_key.require_tags).toBe(false);
    const bad = await w.gw.call(`/v1/organizations/routing-keys?id=${strictKey.id}`, { method: "PATCH", token: w.acct.token, body: { require_tags: "yes" } });
    expect(bad.status).toBe(400);
    // The key cache hears of the change: the same untagged request is now served.
    let served = 0;
    for (let i = 0; i < 50 && served !== 200; i++) {
      served = (await w.gw.call(PATH.chat, { token: strictKey.raw, body: bodyFor("chat", "gpt-4o-mini", false) })).status;
      if (served !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    expect(served).toBe(200);
    await w.gw.call(`/v1/organizations/routing-keys?id=${strictKey.id}`, { method: "PATCH", token: w.acct.token, body: { require_tags: true } });
  });

  test("CONTRACT §9: /blitz writes the header's tags, or the shared metadata.tags, on every prompt's records", async () => {
    const r = await w.gw.call("/blitz", { token: keys.openai.raw, body: { model: "gpt-4o-mini", prompts: ["one", "two"] }, headers: { "x-gateway-tags": "blitz-run" } });
    expect(r.status).toBe(200);
    const rid = ridOf(r);
    const rows = await usageRows(w.gw, sql`${usageRecords.requestId} like ${`${rid}.%`}`);
    expect(rows).toHaveLength(2);
    for (const row of rows) expect(row.tags).toEqual(["blitz-run"]);
    const before = w.up.openai.received.length;
    const viaBody = await w.gw.call("/blitz", { token: keys.openai.raw, body: { model: "gpt-4o-mini", prompts: ["three"], metadata: { tags: ["shared"] } } });
    expect(viaBody.status).toBe(200);
    expect((viaBody.body.results[0] as any).completion).toBeDefined();
    const rows2 = await usageRows(w.gw, sql`${usageRecords.requestId} like ${`${ridOf(viaBody)}.%`}`);
    expect(rows2.map((x) => x.tags)).toEqual([["shared"]]);
    for (const sent of w.up.openai.received.slice(before)) expect(sent.body.metadata).toBeUndefined();
    // Tags are the batch's: a prompt's own metadata.tags is refused, never sent on.
    const own = await w.gw.call("/blitz", { token: keys.openai.raw, body: { model: "gpt-4o-mini", prompts: ["a", { messages: [{ role: "user", content: "b" }], metadata: { tags: ["mine"] } }] } });
    expect(own.status).toBe(400);
    expect(own.body.code).toBe("invalid_tags");
    expect(own.body.error).toContain("prompts[1].metadata.tags");
    const ownJob = await w.gw.call("/blitz/jobs", { token: keys.openai.raw, body: { model: "gpt-4o-mini", prompts: [{ messages: [{ role: "user", content: "b" }], metadata: { tags: ["mine"] } }] } });
    expect(ownJob.status).toBe(400);
    expect(ownJob.body.code).toBe("invalid_tags");
  });

  test("CONTRACT §9: a /blitz job keeps its tags for its items' records", async () => {
    const r = await w.gw.call("/blitz/jobs", { token: keys.openai.raw, body: { model: "gpt-4o-mini", prompts: ["a", "b"] }, headers: { "x-gateway-tags": "job:7" } });
    expect(r.status).toBe(202);
    expect(r.body.tags).toEqual(["job:7"]);
    const job = await jobWhenEnded(w.gw, keys.openai.raw, r.body.id);
    expect(job.tags).toEqual(["job:7"]);
    expect(job.status).toBe("completed");
    const rows = await usageRows(w.gw, and(eq(usageRecords.routingKeyId, keys.openai.id), sql`${usageRecords.tags} @> array['job:7']::text[]`));
    expect(rows).toHaveLength(2);
    expect(new Set(rows.map((x) => x.endpoint))).toEqual(new Set(["blitz"]));
  });
});

describe(`CONTRACT §9: tags in the usage reads (${storesLabel})`, () => {
  const t1 = unique("alpha");
  const t2 = unique("beta");
  let tagged: string[] = [];

  beforeAll(async () => {
    const send = async (tags: string | null, stream = false) => {
      const r = await w.gw.call(PATH.chat, { token: keys.openai.raw, body: bodyFor("chat", "gpt-4o-mini", stream), headers: tags ? { "x-gateway-tags": tags } : {} });
      expect(r.status).toBe(200);
      return ridOf(r);
    };
    tagged = [await send(t1), await send(`${t1},${t2}`, true), await send(t2), await send(`${t2},${t1}`)];
    await send(null);
    await w.gw.ctx.services.usage.flush();
  }, 60_000);

  const groups = async (query: string) => {
    const r = await w.gw.call(`/v1/organizations/usage/groups?${query}`, { token: w.acct.token });
    expect(r.status).toBe(200);
    return r.body;
  };
  const rowsWith = async (tag: string) => usageRows(w.gw, and(eq(usageRecords.accountId, w.acct.id), sql`${usageRecords.tags} @> array[${tag}]::text[]`));

  test("CONTRACT §9: records carry `tags` ([] untagged) and ?tag= lists only the records holding that tag", async () => {
    const r = await w.gw.call(`/v1/organizations/usage/records?tag=${encodeURIComponent(t1)}&limit=200`, { token: w.acct.token });
    expect(r.status).toBe(200);
    const ids = new Set(r.body.records.map((x: any) => x.request_id));
    expect(ids).toEqual(new Set([tagged[0], tagged[1], tagged[3]]));
    for (const rec of r.body.records) expect(rec.tags).toContain(t1);
    const all = await w.gw.call("/v1/organizations/usage/records?limit=200", { token: w.acct.token });
    expect(all.body.records.some((x: any) => Array.isArray(x.tags) && x.tags.length === 0)).toBe(true);
    const bad = await w.gw.call("/v1/organizations/usage/records?tag=a%2Cb", { token: w.acct.token });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain("tag");
  });

  test("CONTRACT §9: groups?by=tag: each tag's group is the sum of the records holding it (a record with two tags counts in both)", async () => {
    const g = await groups("by=tag");
    expect(g.by).toBe("tag");
    for (const tag of [t1, t2]) {
      const rows = await rowsWith(tag);
      const group = g.groups.find((x: any) => x.tag === tag);
      expect(group).toBeDefined();
      expect(group.requests).toBe(new Set(rows.map((x) => x.requestId)).size);
      expect(group.attempts).toBe(rows.length);
      expect(group.prompt_tokens).toBe(rows.reduce((a, x) => a + x.promptTokens, 0));
      expect(group.completion_tokens).toBe(rows.reduce((a, x) => a + x.completionTokens, 0));
      expect(group.cost_usd).toBeCloseTo(rows.reduce((a, x) => a + x.costUsd, 0), 9);
    }
    expect(g.groups.find((x: any) => x.tag === t1).requests).toBe(3);
    expect(g.groups.find((x: any) => x.tag === t2).requests).toBe(3);
    // A calendar month: the same records (they were all written now), and none in a month without them.
    const month = new Date().toISOString().slice(0, 7);
    const m = await groups(`by=tag&month=${month}`);
    expect(m.month).toBe(month);
    expect(m.groups.find((x: any) => x.tag === t1).requests).toBe(3);
    const old = await groups("by=tag&month=2020-01");
    expect(old.groups.filter((x: any) => x.tag !== null)).toEqual([]);
  });

  test("CONTRACT §9: groups?by=tag puts untagged usage in one group with tag null, so the groups less double counting add up to the summary", async () => {
    const g = await groups("by=tag");
    const untagged = g.groups.find((x: any) => x.tag === null);
    expect(untagged).toBeDefined();
    const day = await groups("by=day");
    const total = day.groups.reduce((a: number, x: any) => a + x.requests, 0);
    const allTagged = await usageRows(w.gw, and(eq(usageRecords.accountId, w.acct.id), sql`${usageRecords.tags} is not null`));
    expect(untagged.requests).toBe(total - new Set(allTagged.map((x) => x.requestId)).size);
    const rows = await usageRows(w.gw, and(eq(usageRecords.accountId, w.acct.id), sql`${usageRecords.tags} is null`));
    expect(untagged.cost_usd).toBeCloseTo(rows.reduce((a, x) => a + x.costUsd, 0), 9);
    expect(untagged.prompt_tokens).toBe(rows.reduce((a, x) => a + x.promptTokens, 0));
  });

  test("CONTRACT §9: ?tag= filters the groups of every grouping: only the tag's records count", async () => {
    const rows = await rowsWith(t2);
    const cost = rows.reduce((a, x) => a + x.costUsd, 0);
    for (const by of ["day", "key", "lane", "model", "tag"]) {
      const g = await groups(`by=${by}&tag=${encodeURIComponent(t2)}`);
      expect(g.tag).toBe(t2);
      const groupsOf = by === "tag" ? g.groups.filter((x: any) => x.tag === t2) : g.groups;
      expect(groupsOf.reduce((a: number, x: any) => a + x.requests, 0)).toBe(3);
      expect(groupsOf.reduce((a: number, x: any) => a + x.cost_usd, 0)).toBeCloseTo(cost, 9);
    }
    const byTag = await groups(`by=tag&tag=${encodeURIComponent(t2)}`);
    // The records holding t2 grouped by each of their tags: t2's own and its neighbour's, no untagged group.
    expect(byTag.groups.map((x: any) => x.tag).sort()).toEqual([t1, t2].sort());
    expect(byTag.groups.find((x: any) => x.tag === t1).requests).toBe(2);
    const key = await groups(`by=key&tag=${encodeURIComponent(t2)}`);
    expect(key.groups.map((x: any) => x.routing_key_id)).toEqual([keys.openai.id]);
    const none = await groups("by=day&tag=never-used-tag");
    expect(none.groups).toEqual([]);
    const bad = await w.gw.call("/v1/organizations/usage/groups?by=tag&tag=", { token: w.acct.token });
    expect(bad.status).toBe(400);
  });

  test("CONTRACT §9: tags never become metric labels", async () => {
    const text = await (await w.gw.req("/metrics")).text();
    expect(text.length).toBeGreaterThan(0);
    expect(text).not.toContain(t1);
    expect(text).not.toContain(t2);
    expect(text).not.toContain("team-a");
    expect(text).not.toContain("x-gateway-tags");
  });
});
