// Preloaded into the gateway by bench/count-guards.ts only (never in production): on SIGUSR2 it
// forces a full, synchronous garbage collection between two marker lines on stderr, so the GC log
// (BUN_JSC_logGC=1) can be cut into windows whose allocated bytes the guards add up; the marker
// also carries how many timers the process has armed so far (setTimeout, setInterval,
// setImmediate), the per-request figure the profile reads.
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
  process.stderr.write(`HEAP-MARK ${n} ${JSON.stringify(timers)}\n`);
  Bun.gc(true);
  process.stderr.write(`HEAP-MARK-END ${n}\n`);
});
