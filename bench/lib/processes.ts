// Child processes of a benchmark run (mock upstream, gateway) and what /proc says about them:
// CPU time (utime + stime, all threads) and memory (VmRSS, VmHWM). Pinning uses taskset when the
// machine has it and at least two cores: the gateway gets core 0, everything else core 1.
import { existsSync, readFileSync, readdirSync, openSync, closeSync } from "node:fs";
import { cpus } from "node:os";
import type { Subprocess } from "bun";

export const HAS_TASKSET = cpus().length >= 2 && ["/usr/bin/taskset", "/bin/taskset", "/usr/local/bin/taskset"].some((p) => existsSync(p));

/** Command prefix that pins a child to one core, or nothing when pinning is not possible. */
export function pinned(core: number): string[] {
  return HAS_TASKSET ? ["taskset", "-c", String(core)] : [];
}

let clockTicks: number | null = null;
/** Kernel clock ticks per second (utime/stime unit), from `getconf CLK_TCK`. */
export function ticksPerSecond(): number {
  if (clockTicks !== null) return clockTicks;
  try {
    const out = Bun.spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim();
    clockTicks = Number(out) > 0 ? Number(out) : 100;
  } catch {
    clockTicks = 100;
  }
  return clockTicks;
}

/** CPU time the whole process (every thread) has used so far, in microseconds. */
export function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name (field 2) may contain spaces; everything after the last ")" is fixed-format.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const utime = Number(rest[11]);
  const stime = Number(rest[12]);
  return ((utime + stime) * 1e6) / ticksPerSecond();
}

/** CPU (ns) of a process by thread name, digits dropped (`JITWorker`, `HTTP Client`, `mi-scavenger`, the main thread's `bun`). */
export function threadSplit(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ", 1)[0]);
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim().replace(/[0-9]+$/, "");
      out[name] = (out[name] ?? 0) + ns;
    } catch {} // the thread ended meanwhile
  }
  return out;
}

/**
 * CPU time of the process's threads so far, in microseconds, split into JavaScriptCore's compiler
 * threads (`JITWorker`) and everything else (`/proc/<pid>/task/<tid>/schedstat`, nanoseconds).
 */
export function jitSplit(pid: number): { jitUs: number; allUs: number } {
  const byName = threadSplit(pid);
  let allNs = 0;
  for (const ns of Object.values(byName)) allNs += ns;
  return { jitUs: (byName.JITWorker ?? 0) / 1000, allUs: allNs / 1000 };
}

/** User and system CPU time of the process so far, in microseconds. */
export function cpuSplit(pid: number): { userUs: number; sysUs: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const t = 1e6 / ticksPerSecond();
  return { userUs: Number(rest[11]) * t, sysUs: Number(rest[12]) * t };
}

/** CPU time every process on the machine has used so far (all cores, /proc/stat), in microseconds. */
export function machineBusyMicros(): number {
  const line = readFileSync("/proc/stat", "utf8").split("\n", 1)[0]!;
  // cpu  user nice system idle iowait irq softirq steal …
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  const busy = (f[0] ?? 0) + (f[1] ?? 0) + (f[2] ?? 0) + (f[5] ?? 0) + (f[6] ?? 0) + (f[7] ?? 0);
  return (busy * 1e6) / ticksPerSecond();
}

export interface MemoryKb {
  rssKb: number;
  hwmKb: number;
}

/** Resident memory now and its high-water mark (VmHWM), in kB, from /proc/<pid>/status. */
export function memory(pid: number): MemoryKb {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? NaN);
  return { rssKb: field("VmRSS"), hwmKb: field("VmHWM") };
}

export function isAlive(p: Subprocess): boolean {
  return p.exitCode === null && p.signalCode === null;
}

/** Reads a child's stdout until the first line and returns it (the mock prints its URL). */
export async function firstLine(p: Subprocess<any, "pipe", any>, timeoutMs: number): Promise<string> {
  const reader = (p.stdout as ReadableStream<Uint8Array>).getReader();
  const dec = new TextDecoder();
  let text = "";
  const deadline = Date.now() + timeoutMs;
  while (!text.includes("\n")) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error("timed out waiting for the child's first line of output");
    const r = await Promise.race([reader.read(), Bun.sleep(left).then(() => null)]);
    if (r === null) continue;
    if (r.done) throw new Error(`child exited before printing a line (exit code ${p.exitCode})`);
    text += dec.decode(r.value, { stream: true });
  }
  reader.releaseLock();
  return text.slice(0, text.indexOf("\n")).trim();
}

/** A free TCP port on loopback (bound, read, released). */
export function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

/** Polls `url` until it answers 2xx; fails early when the child exits. */
export async function waitHealthy(url: string, child: Subprocess, timeoutMs: number, describe: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!isAlive(child)) throw new Error(`the process exited with code ${child.exitCode} before answering ${url}\n${describe()}`);
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await r.arrayBuffer();
      if (r.ok) return;
    } catch {}
    if (Date.now() > deadline) throw new Error(`no healthy answer from ${url} within ${timeoutMs} ms\n${describe()}`);
    await Bun.sleep(100);
  }
}

/** Opens a log file for a child's output (appended). */
export function logFile(path: string): number {
  const fd = openSync(path, "a");
  return fd;
}

export function closeFd(fd: number): void {
  try { closeSync(fd); } catch {}
}

/** SIGTERM, then SIGKILL after `graceMs` if the child is still there. */
export async function stopChild(p: Subprocess, graceMs = 10_000): Promise<void> {
  if (!isAlive(p)) return;
  p.kill("SIGTERM");
  const done = await Promise.race([p.exited.then(() => true), Bun.sleep(graceMs).then(() => false)]);
  if (!done) {
    p.kill("SIGKILL");
    await p.exited;
  }
}
