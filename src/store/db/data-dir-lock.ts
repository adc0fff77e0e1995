// One process per embedded data directory. PGlite has no locking of its own: two processes on
// one DATA_DIR each keep their own copy in memory and the last to write its files wins, so
// writes are lost silently. The lock is a file holding the owner's PID, created exclusively;
// a lock whose PID is no longer running (a killed gateway) is stale and taken over.
// Several gateways inside one process (tests) share the lock: it is per process.
import { openSync, readFileSync, rmSync, writeSync, closeSync } from "node:fs";
import { join } from "node:path";

export const LOCK_FILE = "gateway.lock";

export class DataDirInUseError extends Error {
  override name = "DataDirInUseError";
  constructor(readonly dir: string, readonly pid: number) {
    super(`data directory in use: ${dir} is open in another process (PID ${pid}). The embedded database allows one process; stop that one first, or point DATA_DIR elsewhere, or use DATABASE_URL to share a Postgres.`);
  }
}

/** Holders inside this process, by lock path (several in-process gateways share one lock). */
const held = new Map<string, number>();

function isRunning(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: the process exists but belongs to another user.
    return (e as { code?: string }).code === "EPERM";
  }
}

/** The PID holding `dir`, if a running process other than this one does. */
export function lockHolder(dir: string): number | null {
  let pid: number;
  try {
    pid = Number(readFileSync(join(dir, LOCK_FILE), "utf8").trim());
  } catch {
    return null;
  }
  return pid !== process.pid && isRunning(pid) ? pid : null;
}

/** Takes the lock or throws DataDirInUseError. Returns the release function. */
export function lockDataDir(dir: string): () => void {
  const path = join(dir, LOCK_FILE);
  const release = () => {
    const n = (held.get(path) ?? 1) - 1;
    if (n > 0) { held.set(path, n); return; }
    held.delete(path);
    try {
      if (Number(readFileSync(path, "utf8").trim()) === process.pid) rmSync(path, { force: true });
    } catch {}
  };
  if (held.has(path)) {
    held.set(path, held.get(path)! + 1);
    return release;
  }
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, "wx", 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      held.set(path, 1);
      return release;
    } catch (e) {
      if ((e as { code?: string }).code !== "EEXIST") throw e;
    }
    const holder = lockHolder(dir);
    if (holder !== null) throw new DataDirInUseError(dir, holder);
    // Stale (its process is gone) or left by this very process: remove and try again.
    rmSync(path, { force: true });
  }
  throw new Error(`could not lock ${path}`);
}
