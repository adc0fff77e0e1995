// How the admin command finds the gateway that holds an embedded data directory: the gateway
// writes DATA_DIR/admin.json (mode 0600: only its owner reads it) with its PID, its loopback URL
// and a fresh random secret; the command reads it and calls the loopback admin endpoint with the
// secret. Whoever can read the file can already read the database files beside it.
import { readFileSync, rmSync, writeFileSync, renameSync } from "node:fs";
import { join } from "node:path";

export const ADMIN_FILE = "admin.json";

export interface AdminAccess {
  pid: number;
  url: string;
  secret: string;
}

export function writeAdminAccess(dir: string, access: AdminAccess): void {
  const path = join(dir, ADMIN_FILE);
  // Written whole then renamed: a reader never sees half a file.
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(access), { mode: 0o600 });
  renameSync(tmp, path);
}

export function readAdminAccess(dir: string): AdminAccess | null {
  try {
    const v = JSON.parse(readFileSync(join(dir, ADMIN_FILE), "utf8"));
    if (typeof v?.pid === "number" && typeof v.url === "string" && typeof v.secret === "string") return v as AdminAccess;
  } catch {}
  return null;
}

/** Removes the file if it is still this gateway's (a newer gateway may have replaced it). */
export function removeAdminAccess(dir: string, secret: string): void {
  if (readAdminAccess(dir)?.secret === secret) rmSync(join(dir, ADMIN_FILE), { force: true });
}
