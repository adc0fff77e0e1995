// Operator commands, run against the same configuration as the gateway (same environment,
// DATABASE_URL or DATA_DIR):
//   npm run admin -- activate <account id or email>   plan free → pro, deadline cleared
//   npm run admin -- list [--all]                      accounts (live; --all adds removed ones)
//   npm run admin -- show <account id or email>
// With the embedded database (no DATABASE_URL), stop the gateway first: PGlite allows one process.
import { desc, isNull } from "drizzle-orm";
import { ConfigError, loadConfig } from "./config.ts";
import { openDb, type Db } from "./store/db/client.ts";
import { accounts } from "./store/db/schema/index.ts";
import type { Account } from "./management/guard.ts";
import { activateAccount, countLiveTokens, findAccount, findLiveAccountByEmail } from "./signup/lifecycle.ts";
import { normalizeEmail } from "./signup/email-policy.ts";

const USAGE = `Usage: npm run admin -- <command>

  activate <account id or email>   activate the membership: plan becomes pro, the deadline is cleared
  show <account id or email>       print one account
  list [--all]                     print live accounts (--all includes removed ones)

Runs against the gateway's configuration: DATABASE_URL, or the embedded database in DATA_DIR
(stop the gateway first in that case).`;

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

async function run(db: Db, args: string[]): Promise<number> {
  const [cmd, ...rest] = args;
  if (cmd === "activate" || cmd === "show") {
    const ref = rest[0];
    if (!ref || rest.length > 1) { console.error(USAGE); return 2; }
    const acct = await resolve(db, ref);
    if (!acct) { console.error(`No ${ref.includes("@") ? "live account with email" : "account with id"} ${ref}.`); return 1; }
    if (cmd === "show") { console.log(describe(acct, await countLiveTokens(db, acct.id))); return 0; }
    const outcome = await activateAccount(db, acct.id);
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
  const dbh = await openDb({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR });
  let code = 1;
  try {
    code = await run(dbh.db, process.argv.slice(2));
  } finally {
    await dbh.close();
  }
  process.exit(code);
} catch (e) {
  console.error(e instanceof ConfigError ? e.message : `admin failed: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
}
