// Redis round trips of admission per request, by kind of routing key: the admission (budget, rate
// limits, concurrency) must cost one script call per request or less. Counts the admission calls
// exactly (the store's reserve) and every command this gateway sends to Redis (its client's
// sendCommand: the ledger's per-turn writes, settlements, releases, and the background heartbeat
// and drain; pipelined commands count one each).
//   DATABASE_URL=… REDIS_URL=… bun bench/admission-trips.ts [--requests 600] [--json]
// Embedded mode has no Redis: nothing to count.
import type { Cmds } from "../src/store/kv/redis.ts";
import { startMockOpenAI } from "../test/mocks/openai-upstream.ts";
import { createAccount, startTestGateway } from "../test/helpers/gateway.ts";
import { addCredential, addRoutingKey, lane, type KeyOptions } from "../test/relay/fixtures.ts";

export interface TripsRow {
  key: string;
  requests: number;
  ok: number;
  admissionsPerRequest: number;
  redisCommandsPerRequest: number;
}

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};

export async function measureAdmissionTrips(requests = 600): Promise<TripsRow[] | null> {
  if (!process.env.REDIS_URL || !process.env.DATABASE_URL) return null;
  const mock = await startMockOpenAI({ record: false });
  const gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: mock.url });
  let commands = 0;
  const client = (gw.ctx.kv as unknown as { client: Cmds }).client;
  const sendCommand = client.sendCommand.bind(client);
  client.sendCommand = ((...a: Parameters<typeof sendCommand>) => { commands++; return sendCommand(...a); }) as typeof sendCommand;
  let admissions = 0;
  const reserve = gw.ctx.kv.reserve.bind(gw.ctx.kv);
  gw.ctx.kv.reserve = (...a: Parameters<typeof reserve>) => { admissions++; return reserve(...a); };
  try {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const kinds: Array<[string, Partial<KeyOptions>]> = [
      ["no budget, no limits", {}],
      ["budget", { monthlyBudgetUsd: 1000 }],
      ["rpm + tpm limits (hot key)", { rpmLimit: 100_000, tpmLimit: 100_000_000 }],
      ["budget + rpm limit", { monthlyBudgetUsd: 1000, rpmLimit: 100_000 }],
      ["concurrency cap", { maxConcurrentRequests: 64 }],
    ];
    const body = JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], max_tokens: 50 });
    const rows: TripsRow[] = [];
    for (const [label, opts] of kinds) {
      const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], ...opts });
      const send = () => fetch(gw.url + "/v1/chat/completions", { method: "POST", headers: { authorization: `Bearer ${k.raw}`, "content-type": "application/json" }, body })
        .then(async (r) => { await r.arrayBuffer(); return r.status; });
      await send(); // warm: key cache, counters, scripts
      await Bun.sleep(300);
      const a0 = admissions;
      const c0 = commands;
      let ok = 0;
      // 8 clients, each sequential: a busy key as a small fleet drives it.
      await Promise.all(Array.from({ length: 8 }, async () => {
        for (let i = 0; i < requests / 8; i++) if ((await send()) === 200) ok++;
      }));
      await Bun.sleep(300); // the last turn's ledger writes and releases
      rows.push({ key: label, requests, ok, admissionsPerRequest: (admissions - a0) / requests, redisCommandsPerRequest: (commands - c0) / requests });
    }
    return rows;
  } finally {
    await gw.stop();
    await mock.stop();
  }
}

if (import.meta.main) {
  const rows = await measureAdmissionTrips(arg("--requests", 600));
  if (!rows) {
    console.log("admission round trips: embedded mode (no REDIS_URL/DATABASE_URL): admission makes no network round trip");
    process.exit(0);
  }
  if (process.argv.includes("--json")) console.log(JSON.stringify(rows));
  else {
    console.log("| routing key | requests | answered | admission calls / request | Redis commands / request (all, incl. ledger) |");
    console.log("|---|---:|---:|---:|---:|");
    for (const r of rows) console.log(`| ${r.key} | ${r.requests} | ${r.ok} | ${r.admissionsPerRequest.toFixed(3)} | ${r.redisCommandsPerRequest.toFixed(2)} |`);
  }
  process.exit(0);
}
