// A PgBouncer of the test's own in transaction mode (free port, temporary directory), in front of a
// Postgres given by URL. Started as user postgres (PgBouncer refuses root), stopped by its PID.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { freePort } from "./private-postgres.ts";

const SBIN_PATH = `${process.env.PATH ?? ""}:/usr/sbin:/usr/local/sbin`;

/** The path of a binary (Debian puts daemons in /usr/sbin, often outside a user's PATH), or null. */
export function findBinary(name: string): string | null {
  return Bun.which(name, { PATH: SBIN_PATH });
}

export interface PrivatePgBouncer {
  /** `upstreamUrl` with host and port swapped for the pooler's. */
  url: string;
  port: number;
  stop(): Promise<void>;
}

export async function startPrivatePgBouncer(upstreamUrl: string, opts: { poolSize?: number } = {}): Promise<PrivatePgBouncer> {
  const bin = findBinary("pgbouncer");
  if (!bin) throw new Error("pgbouncer is not installed (apt-get install pgbouncer)");
  const up = new URL(upstreamUrl);
  const dir = mkdtempSync(join(tmpdir(), "gw-pgb-"));
  chmodSync(dir, 0o777);
  const port = await freePort();
  const user = decodeURIComponent(up.username || "postgres");
  writeFileSync(join(dir, "users.txt"), `"${user}" ""\n`);
  writeFileSync(join(dir, "pgbouncer.ini"), [
    "[databases]",
    `* = host=${up.hostname} port=${up.port || "5432"}`,
    "[pgbouncer]",
    "listen_addr = 127.0.0.1",
    `listen_port = ${port}`,
    "unix_socket_dir =",
    "auth_type = trust",
    `auth_file = ${join(dir, "users.txt")}`,
    "pool_mode = transaction",
    `default_pool_size = ${opts.poolSize ?? 4}`,
    "max_client_conn = 500",
    // postgres.js sends these startup parameters; PgBouncer refuses unknown ones unless told.
    "ignore_startup_parameters = extra_float_digits,options,application_name",
    `logfile = ${join(dir, "pgbouncer.log")}`,
    "server_reset_query =",
    "",
  ].join("\n"));
  const proc = Bun.spawn([bin, "-u", "postgres", join(dir, "pgbouncer.ini")], { stdout: "ignore", stderr: "pipe" });
  const url = new URL(upstreamUrl);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  let ready = false;
  for (let i = 0; i < 200 && !ready && proc.exitCode === null; i++) {
    const c = postgres(url.toString(), { max: 1, connect_timeout: 1, prepare: false, onnotice: () => {} });
    try {
      await c`select 1`;
      ready = true;
    } catch {
      await Bun.sleep(50);
    } finally {
      await c.end({ timeout: 0 }).catch(() => {});
    }
  }
  const stop = async () => {
    proc.kill("SIGKILL");
    await proc.exited;
    rmSync(dir, { recursive: true, force: true });
  };
  if (!ready) {
    const err = proc.exitCode === null ? "" : await new Response(proc.stderr).text();
    await stop();
    throw new Error(`pgbouncer did not start: ${err.slice(0, 500)}`);
  }
  return { url: url.toString(), port, stop };
}
