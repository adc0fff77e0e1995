// Preloaded into the gateway by bench/count-guards.ts only (never in production), which runs it
// with the collector off (BUN_JSC_useGC=0): nothing is freed, so what the JS heap grew by between
// two marks is what was allocated, byte for byte, and the heap's cell counts by type grew by the
// objects allocated. On SIGUSR2 it writes a marker line on stderr with how many timers the process
// has armed so far (setTimeout, setInterval, setImmediate), the heap's size, its object count and
// its objects by type (what `--detail` lists per request).
import { heapStats } from "bun:jsc";

const timers = { setTimeout: 0, setInterval: 0, setImmediate: 0 };
for (const name of Object.keys(timers) as Array<keyof typeof timers>) {
  const original = globalThis[name] as (...a: unknown[]) => unknown;
  (globalThis as Record<string, unknown>)[name] = Object.assign(function (this: unknown, ...a: unknown[]) {
    timers[name]++;
    return original.apply(this, a);
  }, original);
}
let n = 0;
process.on("SIGUSR2", () => {
  n++;
  let objects = 0;
  const types = heapStats().objectTypeCounts;
  for (const c of Object.values(types)) objects += c;
  const heap = { bytes: process.memoryUsage().heapUsed, objects, types };
  process.stderr.write(`HEAP-MARK ${n} ${JSON.stringify(timers)} ${JSON.stringify(heap)}\n`);
  process.stderr.write(`HEAP-MARK-END ${n}\n`);
});
