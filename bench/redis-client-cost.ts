// Micro-measurement for bench/PROFILE.md: what one admission-shaped script call costs this
// process in CPU (µs, all threads) through ioredis as the gateway configures it, against Bun's
// native Redis client (`Bun.RedisClient`). The script has the admission call's shape (5 keys, 8
// arguments, an array of 4 integers back) so both clients encode and parse what the gateway's
// would; Redis' own time is not in the figure (it is another process).
//   REDIS_URL=redis://127.0.0.1:6379 bun bench/redis-client-cost.ts [rounds]
// Rounds interleave A B B A; figures are medians over rounds. Keys live under a random prefix
// and are deleted at the end.
import Redis from "ioredis";
import { RedisClient } from "bun";

const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const rounds = Number(process.argv[2] ?? 3);
const prefix = `gwbench:rc:${crypto.randomUUID().slice(0, 8)}`;
const LUA = "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) redis.call('PEXPIRE', KEYS[1], 60000) return {n, 0, 1, 2}";
const keys = Array.from({ length: 5 }, (_, i) => `${prefix}:{k}:${i}`);
const args = ["1", "120000", "1700000000000", "4096", "req-0123456789abcdef", "60000", "0", "1"];

type Call = () => Promise<unknown>;

// ioredis exactly as src/store/kv/redis.ts builds it (auto-pipelining, defineCommand).
const io = new Redis(url, { commandTimeout: 500, connectTimeout: 1000, enableOfflineQueue: false, maxRetriesPerRequest: 0, enableAutoPipelining: true }) as Redis & {
  gwBench(...a: string[]): Promise<unknown>;
};
io.defineCommand("gwBench", { numberOfKeys: 5, lua: LUA });
await new Promise((r) => io.once("ready", r));

const bun = new RedisClient(url, { enableOfflineQueue: false, enableAutoPipelining: true });
await bun.connect();
const sha = (await bun.send("SCRIPT", ["LOAD", LUA])) as string;
const bunArgs = [sha, "5", ...keys, ...args];

const clients: Record<string, Call> = {
  ioredis: () => io.gwBench(...keys, ...args),
  "Bun.RedisClient": () => bun.send("EVALSHA", bunArgs),
};

/** CPU µs per call and calls per second, `inFlight` calls at a time (1 = a single client). */
async function measure(call: Call, n: number, inFlight: number): Promise<{ cpu: number; rate: number }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i += inFlight) {
    if (inFlight === 1) await call();
    else await Promise.all(Array.from({ length: inFlight }, call));
  }
  const c = process.cpuUsage(c0);
  const ms = performance.now() - t0;
  return { cpu: (c.user + c.system) / n, rate: (n / ms) * 1000 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const cases = [
  { label: "one call in flight (one client)", n: 10_000, inFlight: 1 },
  { label: "32 calls in flight (pipelined)", n: 64_000, inFlight: 32 },
];

for (const name of Object.keys(clients)) await measure(clients[name]!, 5_000, 8); // warm-up, JIT
console.log(`| case | client | CPU µs per call (median of ${rounds} rounds) | calls/s |`);
console.log("|---|---|---:|---:|");
for (const cs of cases) {
  const got: Record<string, { cpu: number[]; rate: number[] }> = {};
  const order = ["ioredis", "Bun.RedisClient", "Bun.RedisClient", "ioredis"];
  for (let r = 0; r < rounds; r++) {
    for (const name of order) {
      const m = await measure(clients[name]!, cs.n / 2, cs.inFlight);
      (got[name] ??= { cpu: [], rate: [] }).cpu.push(m.cpu);
      got[name]!.rate.push(m.rate);
    }
  }
  for (const [name, g] of Object.entries(got)) {
    console.log(`| ${cs.label} | ${name} | ${median(g.cpu).toFixed(1)} | ${Math.round(median(g.rate))} |`);
  }
}

await io.del(...keys);
io.disconnect();
bun.close();
