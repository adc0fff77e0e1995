// What the usage drain's INSERT costs per record as its batch grows: the records go in as one
// statement (json_to_recordset) and the daily rollup's trigger runs once over them, so the cost
// per record must stay flat from a few hundred records to a few thousand (the drain writes up to
// 2,000 a round, a backlog a few rounds a tick). A rollup rule that looks records up one by one
// makes it grow with the batch: a drain then falls further behind the busier its instance is.
// Fails (exit 1) when a record in a batch of 4,000 costs more than twice one in a batch of 500.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 npx bun bench/usage-drain.ts
import { createAccount, startTestGateway } from "../test/helpers/gateway.ts";
import { median } from "./lib/stats.ts";

if (!process.env.DATABASE_URL) {
  console.error("usage-drain: set DATABASE_URL (the bench writes to a fresh Postgres database)");
  process.exit(2);
}

const SIZES = [100, 500, 1000, 2000, 4000];
const RUNS = 5;

const gw = await startTestGateway();
let code = 0;
try {
  const acct = await createAccount(gw);
  const q = gw.ctx.services.usageQueue;
  let seq = 0;
  // Each record its own money call's first attempt, as a drain mostly sees them.
  const batch = (n: number) => JSON.stringify(Array.from({ length: n }, () => {
    const call = `bench${++seq}`;
    return {
      requestId: `r-${call}`, attempt: 1, recordKey: `${call}.1`, accountId: acct.id, routingKeyId: "rk-bench", endpoint: "chat", laneIndex: 0,
      provider: "openai", model: "gpt-4o-mini", status: 200, outcome: "ok", errorCode: null, promptTokens: 100, completionTokens: 20, cachedTokens: 0,
      cacheWriteTokens: 0, costUsd: 0.0001, priceEstimated: false, latencyMs: 5, ttfbMs: 5, seat: false, createdAt: new Date().toISOString(),
    };
  }));
  // Warm up (plans, partitions) with a few batches first.
  for (let i = 0; i < 3; i++) {
    q.pushJson(batch(500));
    await q.flushQueued();
  }
  const perRecord = new Map<number, number>();
  console.log("| records in one INSERT | median ms | µs per record | records per second |");
  console.log("|---:|---:|---:|---:|");
  for (const n of SIZES) {
    const ms: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      q.pushJson(batch(n));
      const t0 = performance.now();
      await q.flushQueued();
      ms.push(performance.now() - t0);
    }
    const m = median(ms);
    perRecord.set(n, (m * 1000) / n);
    console.log(`| ${n.toLocaleString("en")} | ${m.toFixed(1)} | ${((m * 1000) / n).toFixed(1)} | ${Math.round((n / m) * 1000).toLocaleString("en")} |`);
  }
  const ratio = perRecord.get(4000)! / perRecord.get(500)!;
  console.log(`\nper record, 4,000-record batch ÷ 500-record batch: ${ratio.toFixed(2)}× (≤ 2× expected: the cost is linear in the batch)`);
  if (!(ratio <= 2)) code = 1;
} finally {
  await gw.stop();
}
process.exit(code);
