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
const gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: mock.url, LOG_LEVEL: "warn" });
const acct = await createAccount(gw);
const cred = await addCredential(gw, acct.id, "openai");
const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], cache: { ttl_seconds: 600, shared: false } });
const run = `${Date.now()}`;
const body = (i: number, stream = false) => ({ model: "gpt-4o-mini", messages: [{ role: "user", content: `bench ${run} prompt ${i}` }], ...(stream ? { stream: true } : {}) });

async function one(b: unknown, headers: Record<string, string> = {}): Promise<{ ms: number; xcache: string | null }> {
  const t = performance.now();
  const r = await gw.req("/v1/chat/completions", { method: "POST", token: key.raw, body: b, headers });
  await r.arrayBuffer();
  return { ms: performance.now() - t, xcache: r.headers.get("x-cache") };
}

async function scenario(name: string, make: (i: number) => [unknown, Record<string, string>?]) {
  for (let i = 0; i < 20; i++) await one(...make(-1 - i)); // warm-up
  const ms: number[] = [];
  let hits = 0;
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    const r = await one(...make(i));
    ms.push(r.ms);
    if (r.xcache === "HIT") hits++;
  }
  const cpu = process.cpuUsage(cpu0);
  const row = { scenario: name, p50_ms: +median(ms).toFixed(3), cpu_us_per_request: Math.round((cpu.user + cpu.system) / N), hit_rate: +(hits / N).toFixed(3) };
  console.log(JSON.stringify(row));
  return row;
}

// Seed one entry for the hit scenarios.
await one(body(0));
await scenario("live (no-store)", (i) => [body(i), { "cache-control": "no-store" }]);
await scenario("hit, JSON", () => [body(0)]);
await scenario("hit, SSE", () => [body(0, true)]);
// A fleet re-sending: every prompt is one of N/2, so about half the requests repeat an earlier one.
const mixed = `${run}-mixed`;
await scenario("mixed (≈50 % repeats)", (i) => [{ model: "gpt-4o-mini", messages: [{ role: "user", content: `mixed ${mixed} ${Math.floor(Math.random() * Math.max(1, N / 2))}` }] }]);
await gw.stop();
await mock.stop();
