// The operator commands (`npm run admin -- …`), as one function over a database: the CLI runs it
// directly when no gateway holds the embedded database, and a running gateway runs it for the
// CLI through its loopback admin endpoint (admin/local-endpoint.ts) when one does.
import { desc, isNull } from "drizzle-orm";
import type { Db } from "../store/db/client.ts";
import { accounts } from "../store/db/schema/index.ts";
import type { Account } from "../management/guard.ts";
import { activateAccount, countLiveTokens, findAccount, findLiveAccountByEmail } from "../signup/lifecycle.ts";
import { normalizeEmail } from "../signup/email-policy.ts";

export const USAGE = `Usage: npm run admin -- <command>

  activate <account id or email>   activate the membership: plan becomes pro, the deadline is cleared
  show <account id or email>       print one account
  list [--all]                     print live accounts (--all includes removed ones)

Runs against the gateway's configuration: DATABASE_URL (beside running gateways), or the
embedded database in DATA_DIR (through the running gateway when one holds it, directly otherwise).`;

/** Where a command writes: the terminal, or the admin endpoint's answer. */
export interface AdminOutput {
  out(line: string): void;
  err(line: string): void;
}

/** What a command needs besides the database: telling running caches that an account changed. */
export interface AdminEffects {
  accountChanged(accountId: string): Promise<void>;
}

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

/** Runs one command; returns its exit code (0 done, 1 refused or not found, 2 usage). */
export async function runAdminCommand(db: Db, args: string[], io: AdminOutput, effects: AdminEffects): Promise<number> {
  const [cmd, ...rest] = args;
  if (cmd === "activate" || cmd === "show") {
    const ref = rest[0];
    if (!ref || rest.length > 1) { io.err(USAGE); return 2; }
    const acct = await resolve(db, ref);
    if (!acct) { io.err(`No ${ref.includes("@") ? "live account with email" : "account with id"} ${ref}.`); return 1; }
    if (cmd === "show") { io.out(describe(acct, await countLiveTokens(db, acct.id))); return 0; }
    const outcome = await activateAccount(db, acct.id);
    // Gateways cached the account's keys with its deadline: drop them everywhere.
    if (outcome === "activated") await effects.accountChanged(acct.id);
    const after = (await findAccount(db, acct.id)) ?? acct;
    if (outcome === "activated") { io.out(`Activated ${acct.id} (${acct.email}): plan pro, deadline cleared.`); return 0; }
    if (outcome === "already_active") { io.out(`Nothing to do: ${acct.id} (${acct.email}) is already pro.`); return 0; }
    io.err(`Not activated: ${describe(after)}. A removed account is never revived; the owner can sign up again.`);
    return 1;
  }
  if (cmd === "list") {
    const all = rest.includes("--all");
    if (rest.some((r) => r !== "--all")) { io.err(USAGE); return 2; }
    const rows = await db.select().from(accounts).where(all ? undefined : isNull(accounts.removedAt)).orderBy(desc(accounts.createdAt));
    for (const a of rows) io.out(describe(a));
    io.out(`${rows.length} account${rows.length === 1 ? "" : "s"}${all ? "" : " (live)"}`);
    return 0;
  }
  if (cmd === undefined || cmd === "help" || cmd === "--help") { io.out(USAGE); return 0; }
  io.err(USAGE);
  return 2;
}
