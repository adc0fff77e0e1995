// A vendor batch job survives its gateway going away (CONTRACT §9 "Batch work"): the batch id is
// in Postgres, so the gateway polling it stops mid-job (its polling loop and all) and another one
// over the same database finishes it (real stores: the first's polling loop stops, the second shares its stores): one upload, one vendor batch, one record per item, the
// key's counter their sum. Embedded: the same data directory opened again after the first closed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq, like } from "drizzle-orm";
import { createAccount, REAL_STORES, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { until } from "../helpers/until.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, lane } from "../relay/fixtures.ts";
import { keyContextOf } from "../helpers/relay-world.ts";
import { monthSpendUsd } from "../../src/money/counters.ts";
import { relayDeps } from "../../src/relay/relay-deps.ts";
import { blitzVendorBatches, usageRecords } from "../../src/store/db/schema/index.ts";

describe(`a vendor batch job across a restart (${storesLabel})`, () => {
  let A: MockUpstream;
  let gw: TestGateway | null = null;
  const extra: TestGateway[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), "gw-vendor-restart-"));
  const secret = randomBytes(32).toString("hex");
  const open = () => startTestGateway({ PROVIDER_OPENAI_BASE_URL: A.url, GATEWAY_SECRET_KEY: secret, ...(REAL_STORES ? {} : { DATA_DIR: dataDir }) });

  beforeAll(async () => { A = await startMockOpenAI(); }, 10_000);
  afterAll(async () => {
    await gw?.stop();
    for (const g of extra) await g.stop();
    await A?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);

  test("CONTRACT §9 batch work: the gateway polling a vendor batch stops mid-job; another one on the same database finishes it, nothing lost or doubled", async () => {
    A.batch.setOptions({ hold: true });
    gw = await open();
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 100 });
    const n = 250;
    const prompts = Array.from({ length: n }, (_, i) => ({ messages: [{ role: "user", content: `VR p${i}` }], mock: { prompt_tokens: 80, completion_tokens: 40 } }));
    const r = await gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 50, completion_window: "24h", prompts } });
    expect(r.status).toBe(202);
    const id = String(r.body.id);
    await until("the vendor batch id stored", async () => {
      const [row] = await gw!.ctx.db.select().from(blitzVendorBatches).where(eq(blitzVendorBatches.jobId, id));
      return row?.vendorBatchId ? row : null;
    }, 30_000);
    // Real stores: the first gateway's polling loop stops (its database stays: the second shares
    // it); embedded: the first gateway closes and the second opens its data directory.
    let first: TestGateway | null = null;
    if (REAL_STORES) {
      await gw.jobs.find((j) => j.name === "blitz-vendor-batches")!.stop();
      first = gw;
    } else await gw.stop();
    A.batch.setOptions({});
    gw = REAL_STORES ? await startTestGateway({ PROVIDER_OPENAI_BASE_URL: A.url }, { shareWith: first! }) : await open();
    if (first) extra.push(first);
    const done = await until("the job's end", async () => {
      const j = await gw!.call(`/blitz/jobs/${id}?limit=1`, { token: key.raw });
      return j.body.status === "completed" ? j.body : null;
    }, 60_000);
    expect(done.progress.succeeded).toBe(n);
    expect(A.batch.uploads).toBe(1);
    expect(A.batch.batches.size).toBe(1);
    await gw.ctx.services.usage.flush();
    const rows = await gw.ctx.db.select().from(usageRecords).where(like(usageRecords.requestId, `${id}.%`));
    expect(rows).toHaveLength(n);
    expect(new Set(rows.map((x) => x.requestId)).size).toBe(n);
    const sum = rows.reduce((a, x) => a + x.costUsd, 0);
    expect(sum).toBeGreaterThan(0);
    const spent = await monthSpendUsd(relayDeps(gw.ctx), (await keyContextOf(gw, key.raw))!);
    expect(spent.usd).toBeCloseTo(sum, 6);
  }, 120_000);
});
