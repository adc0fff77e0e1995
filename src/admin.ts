// Operator commands, run against the same configuration as the gateway (same environment,
// DATABASE_URL or DATA_DIR):
//   npm run admin -- activate <account id or email>   plan free → pro, deadline cleared
//   npm run admin -- list [--all]                      accounts (live; --all adds removed ones)
//   npm run admin -- show <account id or email>
// With DATABASE_URL the command runs beside running gateways and tells them (Postgres NOTIFY) so
// their caches see the change at once. The embedded database (no DATABASE_URL) allows one
// process: while a gateway holds DATA_DIR the command refuses and says what to do, rather than
// write into a copy the gateway would overwrite.
import { desc, isNull } from "drizzle-orm";
import { ConfigError, loadConfig } from "./config.ts";
import { openDb, type Db, type DbHandle } from "./store/db/client.ts";
import { DataDirInUseError } from "./store/db/data-dir-lock.ts";
import { notifyStatement } from "./store/invalidation.ts";
import { accounts } from "./store/db/schema/index.ts";
import type { Account } from "./management/guard.ts";
import { activateAccount, countLiveTokens, findAccount, findLiveAccountByEmail } from "./signup/lifecycle.ts";
import { normalizeEmail } from "./signup/email-policy.ts";

const USAGE = `Usage: npm run admin -- <command>

  activate <account id or email>   activate the membership: plan becomes pro, the deadline is cleared
  show <account id or email>       print one account
  list [--all]                     print live accounts (--all includes removed ones)

Runs against the gateway's configuration: DATABASE_URL (beside running gateways), or the
embedded database in DATA_DIR (refused while a gateway runs on it: stop the gateway first).`;

async function resolve(db: Db, ref: string): Promise<Account | null> {
  if (ref.includes("@")) return findLiveAccountByEmail(db, normalizeEmail(ref));
  return findAccount(db, ref.trim());
}

function describe(a: Account, tokens?: number): string {
  const state = a.removedAt ? `removed ${a.removedAt.toISOString()}` : a.plan;
  const deadline = !a.removedAt && a.plan === "free" && a.accountExpiresAt ? `  deadline ${a.accountExpiresAt.toISOString()}` : "";
  const t = tokens === undefined ? "" : `  live tokens ${tokens}`;
  return `${a.id}  ${a.email}  ${state}${deadline}  created ${a.createdAt.toISOString()}${a.source ? `  source ${a.source}` : ""}${t}`;
}

async function run(db: Db, kind: DbHandle["kind"], args: string[]): Promise<number> {
  const [cmd, ...rest] = args;
  if (cmd === "activate" || cmd === "show") {
    const ref = rest[0];
    if (!ref || rest.length > 1) { console.error(USAGE); return 2; }
    const acct = await resolve(db, ref);
    if (!acct) { console.error(`No ${ref.includes("@") ? "live account with email" : "account with id"} ${ref}.`); return 1; }
    if (cmd === "show") { console.log(describe(acct, await countLiveTokens(db, acct.id))); return 0; }
    const outcome = await activateAccount(db, acct.id);
    // Running gateways cached the account's keys with its deadline: drop them everywhere.
    if (outcome === "activated" && kind === "postgres") {
      await db.execute(notifyStatement({ kind: "account", accountId: acct.id })).catch(() => {
        console.error("Note: running gateways could not be notified; they pick the change up within a minute.");
      });
    }
    const after = (await findAccount(db, acct.id)) ?? acct;
    if (outcome === "activated") { console.log(`Activated ${acct.id} (${acct.email}): plan pro, deadline cleared.`); return 0; }
    if (outcome === "already_active") { console.log(`Nothing to do: ${acct.id} (${acct.email}) is already pro.`); return 0; }
    console.error(`Not activated: ${describe(after)}. A removed account is never revived; the owner can sign up again.`);
    return 1;
  }
  if (cmd === "list") {
    const all = rest.includes("--all");
    if (rest.some((r) => r !== "--all")) { console.error(USAGE); return 2; }
    const rows = await db.select().from(accounts).where(all ? undefined : isNull(accounts.removedAt)).orderBy(desc(accounts.createdAt));
    for (const a of rows) console.log(describe(a));
    console.log(`${rows.length} account${rows.length === 1 ? "" : "s"}${all ? "" : " (live)"}`);
    return 0;
  }
  console.error(USAGE);
  return cmd === undefined || cmd === "help" || cmd === "--help" ? 0 : 2;
}

try {
  const config = loadConfig(process.env);
  const dbh = await openDb({ databaseUrl: config.DATABASE_URL, directUrl: config.DATABASE_DIRECT_URL, dataDir: config.DATA_DIR });
  let code = 1;
  try {
    code = await run(dbh.db, dbh.kind, process.argv.slice(2));
  } finally {
    await dbh.close();
  }
  process.exit(code);
} catch (e) {
  if (e instanceof DataDirInUseError) {
    console.error(`Refused: a gateway (PID ${e.pid}) is running on the embedded database in ${e.dir}, which allows one process; a write made beside it would be lost.
Either stop the gateway (SIGTERM lets it finish its requests), run this command, and start the gateway again,
or run the gateway and this command with DATABASE_URL (Postgres), where they work side by side.`);
    process.exit(3);
  }
  console.error(e instanceof ConfigError ? e.message : `admin failed: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
}
