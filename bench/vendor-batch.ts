// A 10,000-item /blitz job on each vendor batch API (docs/benchmarks.md "Vendor batches"): one job
// with `completion_window: "24h"` on an openai lane (OpenAI Batch API), one on an anthropic lane
// (Message Batches) and one on a google lane (Gemini batch mode), through the mock upstreams' batch
// APIs, timed from the POST to the job's end; and the same prompts through /v1/files + /v1/batches
// with the official openai SDK on the openai lane, which must give the same records; and a budget
// that fits 60 % of the items (6,000 of 10,000) must refuse the job before anything is uploaded.
// It checks what the batch path promises at that size and fails when it does not hold: one usage
// record per item, each at half its live price, the key's month counter equal to their sum, and
// the hold released. Stores: DATABASE_URL / REDIS_URL when set, else the embedded defaults.
//   bun bench/vendor-batch.ts [--items 10000] [--json]
import { like } from "drizzle-orm";
import OpenAI, { toFile } from "openai";
import { addRoutingKey, keyContextOf, lane, startRelayWorld, usageRows } from "../test/helpers/relay-world.ts";
import { storesLabel } from "../test/helpers/gateway.ts";
import { usageRecords } from "../src/store/db/schema/index.ts";
import { monthSpendUsd } from "../src/money/counters.ts";
import { priceUsd } from "../src/money/pricing.ts";
import { relayDeps } from "../src/relay/relay-deps.ts";
import { batchWorstCase } from "../src/blitz/batches/admission.ts";
import { batchDiscount } from "../src/blitz/vendor/apis.ts";

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const ITEMS = Number(arg("--items") ?? 10_000);
/** Items a tight budget fits (of ITEMS): it must refuse the whole job. */
const FITTING = Math.floor(ITEMS * 0.6);
const MODELS = { openai: "gpt-4o-mini", anthropic: "claude-haiku-4-5", google: "gemini-2.5-flash" } as const;

interface Row {
  /** The lane (and the API, for the SDK batch). */
  provider: string;
  items: number;
  submitMs: number;
  wallMs: number;
  records: number;
  costUsd: number;
  liveUsd: number;
  spentUsd: number;
  problems: string[];
}

const world = await startRelayWorld({ providers: ["openai", "anthropic", "google"] });
const rows: Row[] = [];
const prompts = Array.from({ length: ITEMS }, (_, i) => ({ messages: [{ role: "user", content: `Classify ticket #${i} by urgency.` }], mock: { prompt_tokens: 40, completion_tokens: 8 } }));

/** Checks what the batch path promises of a job or batch whose records are `requestId LIKE id.%`, once it ended. */
async function measured(lane: string, provider: keyof typeof MODELS, id: string, status: string, submitMs: number, wallMs: number, counterBefore: number, raw: string): Promise<Row> {
  const model = MODELS[provider];
  const recs = await usageRows(world.gw, like(usageRecords.requestId, `${id}.%`));
  const costUsd = recs.reduce((a, x) => a + x.costUsd, 0);
  const liveUsd = recs.reduce((a, x) => a + priceUsd(provider, model, { prompt_tokens: x.promptTokens, completion_tokens: x.completionTokens, cached_tokens: 0, cache_write_tokens: 0 }, null).usd, 0);
  const spentUsd = (await monthSpendUsd(relayDeps(world.gw.ctx), (await keyContextOf(world.gw, raw))!)).usd - counterBefore;
  const problems: string[] = [];
  if (status !== "completed") problems.push(`ended ${status}`);
  if (recs.length !== ITEMS || new Set(recs.map((x) => x.requestId)).size !== ITEMS) problems.push(`${recs.length} records for ${ITEMS} items`);
  if (recs.some((x) => x.outcome !== "ok")) problems.push("records not ok");
  if (Math.abs(costUsd - liveUsd / 2) > 1e-9 * ITEMS) problems.push(`cost ${costUsd} is not half the live ${liveUsd}`);
  if (Math.abs(spentUsd - costUsd) > 1e-6) problems.push(`the key's counter gained ${spentUsd}, the records hold ${costUsd}`);
  return { provider: lane, items: ITEMS, submitMs, wallMs, records: recs.length, costUsd, liveUsd, spentUsd, problems };
}

try {
  for (const provider of ["openai", "anthropic", "google"] as const) {
    const model = MODELS[provider];
    const key = await addRoutingKey(world.gw, world.acct.id, { lanes: [lane(provider, world.cred[provider].id, { model })], monthlyBudgetUsd: 1000 });
    const t0 = performance.now();
    const r = await world.gw.call("/blitz/jobs", { token: key.raw, body: { model, max_tokens: 16, completion_window: "24h", prompts } });
    const submitMs = performance.now() - t0;
    if (r.status !== 202) throw new Error(`POST /blitz/jobs answered ${r.status}: ${JSON.stringify(r.body).slice(0, 300)}`);
    let status = "";
    for (const until = Date.now() + 600_000; ; await Bun.sleep(100)) {
      const j = await world.gw.call(`/blitz/jobs/${r.body.id}?limit=1`, { token: key.raw });
      status = j.body.status;
      if (!["queued", "running"].includes(status) && j.body.progress.remaining === 0) break;
      if (Date.now() > until) throw new Error(`job did not end: ${JSON.stringify(j.body).slice(0, 300)}`);
    }
    rows.push(await measured(provider, provider, r.body.id, status, submitMs, performance.now() - t0, 0, key.raw));

    if (provider !== "openai") continue;
    // A budget that fits 60 % of the items' worst case at the batch price (6,000 of 10,000) refuses the job before upload.
    const per = batchWorstCase(relayDeps(world.gw.ctx), { ...(await keyContextOf(world.gw, key.raw))!, monthlyBudgetUsd: 1 }, [{ model, max_tokens: 16, ...prompts[0]! }])! * batchDiscount(provider);
    const tight = await addRoutingKey(world.gw, world.acct.id, { lanes: [lane(provider, world.cred[provider].id, { model })], monthlyBudgetUsd: per * (FITTING + 0.5) });
    const uploads = world.up.openai.batch.uploads;
    const refused = await world.gw.call("/blitz/jobs", { token: tight.raw, body: { model, max_tokens: 16, completion_window: "24h", prompts } });
    if (refused.status !== 402 || world.up.openai.batch.uploads !== uploads) throw new Error(`a budget fitting ${FITTING} items: ${refused.status}, ${world.up.openai.batch.uploads - uploads} uploads`);
    if (!JSON.stringify(refused.body).includes("budget_exceeded")) throw new Error(`a budget fitting ${FITTING} items: ${JSON.stringify(refused.body).slice(0, 300)}`);
    console.error(`a budget fitting ${FITTING} of ${ITEMS} items: 402 budget_exceeded, nothing uploaded`);

    // The same prompts through /v1/files + /v1/batches with the official openai SDK, on the same key.
    const before = (await monthSpendUsd(relayDeps(world.gw.ctx), (await keyContextOf(world.gw, key.raw))!)).usd;
    const client = new OpenAI({ apiKey: key.raw, baseURL: `${world.gw.url}/v1`, maxRetries: 0 });
    const jsonl = prompts.map((p, i) => JSON.stringify({ custom_id: `p-${i}`, method: "POST", url: "/v1/chat/completions", body: { model, max_tokens: 16, ...p } })).join("\n");
    const b0 = performance.now();
    const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), "prompts.jsonl"), purpose: "batch" });
    let batch = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const batchSubmitMs = performance.now() - b0;
    for (const until = Date.now() + 600_000; !["completed", "cancelled", "failed", "expired"].includes(batch.status); await Bun.sleep(100)) {
      if (Date.now() > until) throw new Error(`batch did not end: ${JSON.stringify(batch).slice(0, 300)}`);
      batch = await client.batches.retrieve(batch.id);
    }
    const row = await measured("openai, /v1/batches (openai SDK)", provider, batch.id, batch.status, batchSubmitMs, performance.now() - b0, before, key.raw);
    // The same records as the job's: as many, the same cost.
    const job = rows.at(-1)!;
    if (Math.abs(row.costUsd - job.costUsd) > 1e-9 * ITEMS) row.problems.push(`the SDK batch's records hold ${row.costUsd}, the job's ${job.costUsd}`);
    rows.push(row);
  }
} finally {
  await world.stop();
}

if (process.argv.includes("--json")) console.log(JSON.stringify({ stores: storesLabel, rows }, null, 2));
else {
  console.log(`Vendor batch jobs of ${ITEMS} items (${storesLabel}):`);
  console.log("| lane | submit | POST to end | records | cost | live price | counter gained |");
  console.log("|---|---|---|---|---|---|---|");
  for (const x of rows) {
    console.log(`| ${x.provider} | ${x.submitMs.toFixed(0)} ms | ${(x.wallMs / 1000).toFixed(1)} s | ${x.records} | $${x.costUsd.toFixed(6)} | $${x.liveUsd.toFixed(6)} | $${x.spentUsd.toFixed(6)} |`);
  }
}
const bad = rows.filter((x) => x.problems.length);
for (const x of bad) console.error(`${x.provider}: ${x.problems.join("; ")}`);
process.exit(bad.length ? 1 : 0);
