// Micro-measurement of the money path's cost per request in this process (CPU, µs): open →
// record one attempt → settle, in batches of 100 per event-loop turn, as a busy gateway runs them.
// Run with and without REDIS_URL to see what the durable ledger adds:
//   DATABASE_URL=… REDIS_URL=… bun bench/ledger-cost.ts     (ledger: entries, stream, settlements)
//   bun bench/ledger-cost.ts                                 (embedded: in-memory queue only)
import { startTestGateway } from "../test/helpers/gateway.ts";
import { createAccount } from "../test/helpers/gateway.ts";
import { addCredential, addRoutingKey, lane } from "../test/relay/fixtures.ts";
import { resolveRoutingKey } from "../src/relay/auth.ts";
import { MoneyCall } from "../src/money/money.ts";

const gw = await startTestGateway({});
const acct = await createAccount(gw);
const cred = await addCredential(gw, acct.id, "openai");
const mk = async (budget: number | null) => {
  const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: budget });
  return resolveRoutingKey(gw.ctx, new Request("http://gw/", { headers: { authorization: `Bearer ${k.raw}` } }));
};
const adapter = { id: "openai", seat: false };
const body = { model: "gpt-4o-mini", messages: [{ role: "user", content: "Say hello." }], max_tokens: 50 };
const usage = { prompt_tokens: 10, completion_tokens: 20, cached_tokens: 0, cache_write_tokens: 0 };
const release = gw.ctx.services.usage.hold();

async function run(label: string, budget: number | null, n: number) {
  const key = await mk(budget);
  const turn = () => new Promise((r) => setImmediate(r));
  // Warm up (JIT, script load, counter seed).
  for (let i = 0; i < 200; i++) { const c = await MoneyCall.open(gw.ctx, key, { requestId: `w${label}${i}`, endpoint: "chat" }, body, 100); c.record({ adapter, provider: "openai", laneIndex: 0, model: "gpt-4o-mini", status: 200, outcome: "ok", errorCode: null, usage, latencyMs: 1, ttfbMs: 1 }); c.settle(); }
  await turn(); await Bun.sleep(100);
  const t0 = process.cpuUsage();
  const w0 = performance.now();
  for (let b = 0; b < n / 100; b++) {
    const calls = await Promise.all(Array.from({ length: 100 }, (_, i) => MoneyCall.open(gw.ctx, key, { requestId: `${label}${b}.${i}`, endpoint: "chat" }, body, 100)));
    await turn();
    for (const c of calls) { c.record({ adapter, provider: "openai", laneIndex: 0, model: "gpt-4o-mini", status: 200, outcome: "ok", errorCode: null, usage, latencyMs: 1, ttfbMs: 1 }); c.settle(); }
    await turn();
  }
  await Bun.sleep(200);
  const d = process.cpuUsage(t0);
  console.log(`${label}: ${((d.user + d.system) / n).toFixed(2)} µs CPU per request (${n} requests, wall ${((performance.now() - w0) / n * 1000).toFixed(1)} µs each)`);
}

const mode = gw.ctx.kv.kind;
await run(`${mode} no budget`, null, 20_000);
await run(`${mode} budgeted`, 1000, 20_000);
release();
const warnings = gw.logs.filter((l) => /"level":(40|50)/.test(l));
if (warnings.length) console.log(`${warnings.length} warnings, e.g. ${warnings[0]!.slice(0, 300)}`);
await gw.stop();
process.exit(0);
