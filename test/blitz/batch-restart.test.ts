// A batch survives its gateway going away (CONTRACT §7 durability, §9 "Batch work"): the instance
// running it stops midway and another one over the same stores finishes it. Nothing is lost
// (every line is in the output or the error file), nothing is charged twice (one usage record per
// line; the key's counter is their sum). Real stores: child gateways over the shared Postgres and
// Redis, the first one SIGKILLed (its in-flight lines are reconciled from the ledger). Embedded:
// the same data directory opened by one process after the other, the first one restarted with
// SIGTERM (a SIGKILL there loses up to the last second of records: docs/operations.md).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { like } from "drizzle-orm";
import OpenAI, { toFile } from "openai";
import { createAccount, REAL_STORES, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { until } from "../helpers/until.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { spawnSibling, type ChildGateway } from "../relay/child-gateway.ts";
import { addCredential, addRoutingKey, lane } from "../relay/fixtures.ts";
import { monthSpendUsd } from "../../src/money/counters.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";

describe(`a batch across a restart (${storesLabel})`, () => {
  let A: MockUpstream;
  let gw: TestGateway | null = null;
  const children: ChildGateway[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), "gw-batch-restart-"));
  const secret = randomBytes(32).toString("hex");
  const childEnv = () => ({ PROVIDER_OPENAI_BASE_URL: A.url, ALLOW_PRIVATE_UPSTREAMS: "true", INSTANCE_DEAD_AFTER_SECONDS: "2", BLITZ_JOB_LOCK_MS: "1500", BLITZ_JOB_CONCURRENCY: "4" });
  // Embedded: the test gateway is the database's only process while it is open.
  const open = () => startTestGateway({ PROVIDER_OPENAI_BASE_URL: A.url, INSTANCE_DEAD_AFTER_SECONDS: "2", ...(REAL_STORES ? {} : { DATA_DIR: dataDir, GATEWAY_SECRET_KEY: secret }) });
  const sibling = () => spawnSibling(gw!, childEnv());

  beforeAll(async () => {
    A = await startMockOpenAI();
  }, 10_000);
  afterAll(async () => {
    for (const c of children) await c.kill().catch(() => {});
    await gw?.stop();
    await A?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);

  test("CONTRACT §9 Batch work: the instance running a batch stops midway (SIGKILL on real stores); another finishes it, every line in a file, one record per line, the counter their sum", async () => {
    gw = await open();
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 100 });
    const env = gw.env;
    if (REAL_STORES) await gw.ctx.services.blitzJobs.queue.close(); // it reads the stores and reconciles; the children run the lines
    else {
      await gw.stop();
      gw = { env } as TestGateway;
    }
    const first = await sibling();
    children.push(first);
    const n = 60;
    const lines = Array.from({ length: n }, (_, i) => JSON.stringify({ custom_id: `k-${i}`, method: "POST", url: "/v1/chat/completions", body: { model: "gpt-4o-mini", max_tokens: 20, messages: [{ role: "user", content: `K p${i}.` }], mock: { latency_ms: 60 } } }));
    const c1 = new OpenAI({ apiKey: key.raw, baseURL: `${first.url}/v1`, maxRetries: 0 });
    const file = await c1.files.create({ file: await toFile(Buffer.from(lines.join("\n")), "k.jsonl"), purpose: "batch" });
    const batch = await c1.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await until("a fifth of the batch", async () => ((await c1.batches.retrieve(batch.id)).request_counts!.completed >= n / 5 ? true : null), 60_000);
    if (REAL_STORES) await first.kill();
    else await first.terminate();

    const second = await sibling();
    children.push(second);
    const c2 = new OpenAI({ apiKey: key.raw, baseURL: `${second.url}/v1`, maxRetries: 0 });
    const done = await until("the batch's end", async () => {
      const b = await c2.batches.retrieve(batch.id);
      return b.status === "completed" ? b : null;
    }, 120_000);
    expect(done.request_counts!.total).toBe(n);
    expect(done.request_counts!.completed + done.request_counts!.failed).toBe(n);
    // Nothing lost: every line is in exactly one of the two files.
    const read = async (id: string | undefined) => (id ? (await (await c2.files.content(id)).text()).split("\n").filter(Boolean).map((l) => JSON.parse(l)) : []);
    const out = await read(done.output_file_id);
    const errs = await read(done.error_file_id);
    expect(out.length).toBe(done.request_counts!.completed);
    expect([...out, ...errs].map((l) => l.custom_id).sort()).toEqual(Array.from({ length: n }, (_, i) => `k-${i}`).sort());
    // A line in the error file is one that was in flight on the dead instance: interrupted, never sent again.
    for (const e of errs) expect(e.error.code).toBe("interrupted");

    // Nothing doubled: one usage record per line once the dead instance's in-flight entries are
    // reconciled; the key's counter is their sum.
    if (!REAL_STORES) {
      await second.terminate();
      gw = await open();
    }
    const g = gw!;
    const itemOf = (requestId: string | null) => Number((requestId ?? "").slice(batch.id.length + 1).split(".")[0]);
    const rows = await until("one usage record per line", async () => {
      await g.ctx.services.usage.flush();
      const rs = await g.ctx.db.select().from(usageRecords).where(like(usageRecords.requestId, `${batch.id}.%`));
      return new Set(rs.map((r) => itemOf(r.requestId))).size === n ? rs : null;
    }, 60_000);
    expect(rows).toHaveLength(n);
    // Upstream: a line sent twice is one rerun because its first attempt left no trace in the money path.
    const sent = new Map<number, number>();
    for (const r of A.received) {
      const m = /K p(\d+)\./.exec(JSON.stringify(r.body?.messages ?? ""));
      if (m) sent.set(Number(m[1]), (sent.get(Number(m[1])) ?? 0) + 1);
    }
    for (const count of sent.values()) expect(count).toBeLessThanOrEqual(2);
    await g.ctx.services.settleBatcher.flush();
    const counter = (await monthSpendUsd(g.ctx, { id: key.id, monthlyBudgetUsd: 100, budgetExcludesSeats: true })).usd;
    expect(counter).toBeCloseTo(rows.reduce((a, r) => a + r.costUsd, 0), 9);
  }, 300_000);
});
