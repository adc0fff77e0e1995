// The response cache beside a live request (docs/caching.md, docs/benchmarks.md): one gateway
// in this process (embedded stores, or Postgres + Redis when DATABASE_URL / REDIS_URL are set),
// the OpenAI mock upstream, a routing key with `cache`. It measures, request after request from
// one client: a live request (`Cache-Control: no-store`: the full relay through the cache's
// door), a hit (JSON and SSE), and a mixed workload of which a share repeats earlier prompts,
// reporting the hit rate the cache reached. Figures: median latency per request and the process's
// CPU per request (gateway, mock and client together, so the differences are what count).
//   bun bench/cache-hit.ts [requests-per-scenario]
import { startMockOpenAI } from "../test/mocks/openai-upstream.ts";
import { createAccount, startTestGateway } from "../test/helpers/gateway.ts";
import { addCredential, addRoutingKey, lane } from "../test/relay/fixtures.ts";
import { median } from "./lib/stats.ts";

const N = Number(process.argv[2] ?? 300);
const mock = await startMockOpenAI({ record: false });
// An answer of a realistic length (300 tokens, streamed as 300 chunks): a replay's work grows with it.
const ANSWER_TOKENS = 300;
mock.setDefault({ chunks: ANSWER_TOKENS });
const gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: mock.url, LOG_LEVEL: "warn" });
const acct = await createAccount(gw);
const cred = await addCredential(gw, acct.id, "openai");
const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], cache: { ttl_seconds: 600, shared: false } });
// The same lane on a key without a cache: what a request costs when the cache is not in the way at all.
const plain = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
const run = `${Date.now()}`;
const body = (i: number, stream = false) => ({ model: "gpt-4o-mini", messages: [{ role: "user", content: `bench ${run} prompt ${i}` }], ...(stream ? { stream: true } : {}) });

async function one(b: unknown, headers: Record<string, string> = {}, token = key.raw): Promise<{ ms: number; xcache: string | null }> {
  const t = performance.now();
  const r = await gw.req("/v1/chat/completions", { method: "POST", token, body: b, headers });
  await r.arrayBuffer();
  return { ms: performance.now() - t, xcache: r.headers.get("x-cache") };
}

async function scenario(name: string, make: (i: number) => [unknown, Record<string, string>?, string?]) {
  // Every scenario's usage records are written inside its own window: what a request costs includes its record.
  await gw.ctx.services.usage.flush();
  for (let i = 0; i < 20; i++) await one(...make(-1 - i)); // warm-up
  const ms: number[] = [];
  let hits = 0;
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    const r = await one(...make(i));
    ms.push(r.ms);
    if (r.xcache === "HIT") hits++;
  }
  await gw.ctx.services.usage.flush();
  const cpu = process.cpuUsage(cpu0);
  const row = { scenario: name, p50_ms: +median(ms).toFixed(3), cpu_us_per_request: Math.round((cpu.user + cpu.system) / N), hit_rate: +(hits / N).toFixed(3) };
  console.log(JSON.stringify(row));
  return row;
}

// Seed one entry for the hit scenarios.
await one(body(0));
await scenario("live, key without cache", (i) => [body(i), {}, plain.raw]);
await scenario("live (no-store)", (i) => [body(i), { "cache-control": "no-store" }]);
await scenario("miss, answer stored", (i) => [body(N + i)]);
await scenario("hit, JSON", () => [body(0)]);
await scenario("live SSE, key without cache", (i) => [body(2 * N + i, true), {}, plain.raw]);
await scenario("hit, SSE", () => [body(0, true)]);
// A fleet re-sending: every prompt is one of N/2, so about half the requests repeat an earlier one.
const mixed = `${run}-mixed`;
await scenario("mixed (≈50 % repeats)", (i) => [{ model: "gpt-4o-mini", messages: [{ role: "user", content: `mixed ${mixed} ${Math.floor(Math.random() * Math.max(1, N / 2))}` }] }]);

// The replay alone, without HTTP, on the entry the hit scenarios served: the stored answer written
// out afresh (what the first hit of a protocol and mode does) against a copy of the pre-encoded
// bytes with fresh ids written in (what every later hit does).
const { entryKey, routeDigest } = await import("../src/cache/key.ts");
const { resolveRoutingKey } = await import("../src/relay/auth.ts");
const keyCtx = await resolveRoutingKey(gw.ctx, new Request("http://gw/", { headers: { authorization: `Bearer ${key.raw}` } }));
const { replaySse, replayJson } = await import("../src/cache/answer.ts");
const { ReplayTemplates } = await import("../src/cache/replay-template.ts");
const { MemoryCacheStore, RedisCacheStore } = await import("../src/cache/store.ts");
const store = (gw.ctx.services.responseCache as unknown as { deps: { store: InstanceType<typeof MemoryCacheStore> | InstanceType<typeof RedisCacheStore> } }).deps.store;
const entry = JSON.parse((await store.get(entryKey({ accountId: acct.id, keyId: key.id, shared: false, route: routeDigest(keyCtx!) }, "chat", body(0))))!);
const templates = new ReplayTemplates(1 << 24);
const enc = new TextEncoder();
const sseReq = body(0, true);
const perCall = (fn: () => unknown, n = 2000) => {
  for (let i = 0; i < 100; i++) fn();
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) fn();
  const c = process.cpuUsage(c0);
  return Math.round(((c.user + c.system) / n) * 10) / 10;
};
console.log(JSON.stringify({
  replay_alone: `${entry.wire.events?.length ?? 1} ${entry.wire.events ? "events" : "JSON body"}`,
  sse_encoded_per_hit_us: perCall(() => replaySse("chat", sseReq, entry).map((p) => enc.encode(p))),
  sse_from_template_us: perCall(() => templates.bytes("sse", () => replaySse("chat", sseReq, entry).join(""))),
  json_encoded_per_hit_us: perCall(() => enc.encode(replayJson("chat", body(0), entry))),
  json_from_template_us: perCall(() => templates.bytes("json", () => replayJson("chat", body(0), entry))),
}));
await gw.stop();
await mock.stop();
