// Operator commands, run against the same configuration as the gateway (same environment,
// DATABASE_URL or DATA_DIR):
//   npm run admin -- activate <account id or email>   plan free → pro, deadline cleared
//   npm run admin -- list [--all]                      accounts (live; --all adds removed ones)
//   npm run admin -- show <account id or email>
//   npm run admin -- prices list | set <provider> <model> --input N --output N [...] | delete <provider> <model>
// With DATABASE_URL the command runs beside running gateways and tells them (Postgres NOTIFY) so
// their caches see the change at once. The embedded database (no DATABASE_URL) allows one
// process: while a gateway holds DATA_DIR, the command asks that gateway to run it (its loopback
// admin endpoint, with the secret it wrote to DATA_DIR/admin.json); with none running, the
// command opens the database itself.
import { ConfigError, loadConfig } from "./config.ts";
import { openDb } from "./store/db/client.ts";
import { DataDirInUseError, lockHolder } from "./store/db/data-dir-lock.ts";
import { notifyStatement } from "./store/invalidation.ts";
import { readAdminAccess } from "./admin/access-file.ts";
import { ADMIN_SECRET_HEADER } from "./admin/local-endpoint.ts";
import { runAdminCommand } from "./admin/commands.ts";

const terminal = { out: (l: string) => console.log(l), err: (l: string) => console.error(l) };

/** The command run by the gateway holding `dataDir`; null when that gateway offers no admin file. */
async function throughGateway(dataDir: string, holder: number, args: string[]): Promise<number | null> {
  const access = readAdminAccess(dataDir);
  if (!access || access.pid !== holder) return null;
  const res = await fetch(`${access.url}/admin/commands`, {
    method: "POST",
    headers: { "content-type": "application/json", [ADMIN_SECRET_HEADER]: access.secret },
    body: JSON.stringify({ args }),
  });
  const body = (await res.json().catch(() => null)) as { exit_code?: number; stdout?: string[]; stderr?: string[]; error?: string } | null;
  if (!res.ok || typeof body?.exit_code !== "number") {
    console.error(`The gateway (PID ${holder}) at ${access.url} refused the admin command: HTTP ${res.status}${body?.error ? `: ${body.error}` : ""}`);
    return 1;
  }
  for (const l of body.stdout ?? []) console.log(l);
  for (const l of body.stderr ?? []) console.error(l);
  return body.exit_code;
}

async function direct(config: { DATABASE_URL?: string; DATABASE_DIRECT_URL?: string; DATA_DIR: string }, args: string[]): Promise<number> {
  const dbh = await openDb({ databaseUrl: config.DATABASE_URL, directUrl: config.DATABASE_DIRECT_URL, dataDir: config.DATA_DIR });
  try {
    return await runAdminCommand(dbh.db, args, terminal, {
      accountChanged: async (accountId) => {
        // Running gateways cached the account's keys with its deadline: tell them (Postgres only;
        // with the embedded database no gateway is running, or this would not run here).
        if (dbh.kind !== "postgres") return;
        await dbh.db.execute(notifyStatement({ kind: "account", accountId })).catch(() => {
          console.error("Note: running gateways could not be notified; they pick the change up within a minute.");
        });
      },
      pricesChanged: async () => {
        // Running gateways read the operator_prices table again when told (Postgres only, as above).
        if (dbh.kind !== "postgres") return;
        await dbh.db.execute(notifyStatement({ kind: "prices" })).catch(() => {
          console.error("Note: running gateways could not be notified; they read the new prices when they next start or hear of a change.");
        });
      },
    });
  } finally {
    await dbh.close();
  }
}

const refusedHelp = (pid: number, dir: string) =>
  `Refused: a gateway (PID ${pid}) is running on the embedded database in ${dir} but offers no admin endpoint (${dir}/admin.json is missing: a gateway older than this command?).
Either stop the gateway (Ctrl-C or SIGTERM lets it finish its requests), run this command, and start the gateway again,
or run the gateway and this command with DATABASE_URL (Postgres), where they work side by side.`;

try {
  const config = loadConfig(process.env);
  const args = process.argv.slice(2);
  let code: number | null = null;
  if (!config.DATABASE_URL) {
    const holder = lockHolder(config.DATA_DIR);
    if (holder !== null) {
      code = await throughGateway(config.DATA_DIR, holder, args).catch((e) => {
        console.error(`Could not reach the gateway (PID ${holder}) holding ${config.DATA_DIR}: ${e instanceof Error ? e.message : String(e)}`);
        return 1;
      });
      if (code === null) throw new DataDirInUseError(config.DATA_DIR, holder);
    }
  }
  code ??= await direct(config, args);
  process.exit(code);
} catch (e) {
  if (e instanceof DataDirInUseError) {
    console.error(refusedHelp(e.pid, e.dir));
    process.exit(3);
  }
  console.error(e instanceof ConfigError ? e.message : `admin failed: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
}
