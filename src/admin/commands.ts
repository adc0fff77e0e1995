// The operator commands (`npm run admin -- …`), as one function over a database: the CLI runs it
// directly when no gateway holds the embedded database, and a running gateway runs it for the
// CLI through its loopback admin endpoint (admin/local-endpoint.ts) when one does.
import { and, asc, desc, eq, isNull } from "drizzle-orm";
import type { Db } from "../store/db/client.ts";
import { accounts, operatorPrices } from "../store/db/schema/index.ts";
import { operatorPriceEntry, type OperatorPriceEntry } from "../money/operator-prices.ts";
import type { Account } from "../management/guard.ts";
import { activateAccount, countLiveTokens, findAccount, findLiveAccountByEmail } from "../signup/lifecycle.ts";
import { normalizeEmail } from "../signup/email-policy.ts";

export const USAGE = `Usage: npm run admin -- <command>

  activate <account id or email>   activate the membership: plan becomes pro, the deadline is cleared
  show <account id or email>       print one account
  list [--all]                     print live accounts (--all includes removed ones)
  prices list                      print the operator's prices (the table; PRICES_FILE is each gateway's own)
  prices set <provider> <model> --input <usd/Mtok> --output <usd/Mtok>
             [--cache-read <usd/Mtok>] [--cache-write <usd/Mtok>] [--cache-write-1h <usd/Mtok>]
                                   price a model for every gateway (wins over the catalog and PRICES_FILE)
  prices delete <provider> <model> remove an operator price

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
  /** The operator_prices table changed: every gateway reads it again. */
  pricesChanged(): Promise<void>;
}

const PRICE_FLAGS: Record<string, keyof OperatorPriceEntry> = {
  "--input": "input_per_mtok",
  "--output": "output_per_mtok",
  "--cache-read": "cache_read_per_mtok",
  "--cache-write": "cache_write_per_mtok",
  "--cache-write-1h": "cache_write_1h_per_mtok",
};

const perMtok = (v: number | null | undefined) => (v === null || v === undefined ? "-" : String(v));

/** `prices …`: the operator's prices in the operator_prices table (CONTRACT §9). */
async function pricesCommand(db: Db, rest: string[], io: AdminOutput, effects: AdminEffects): Promise<number> {
  const [sub, ...args] = rest;
  if (sub === "list" && args.length === 0) {
    const rows = await db.select().from(operatorPrices).orderBy(asc(operatorPrices.provider), asc(operatorPrices.model));
    for (const r of rows) {
      io.out(`${r.provider}  ${r.model}  input ${r.inputPerMtok}  output ${r.outputPerMtok}  cache-read ${perMtok(r.cacheReadPerMtok)}  cache-write ${perMtok(r.cacheWritePerMtok)}  cache-write-1h ${perMtok(r.cacheWrite1hPerMtok)}  (USD per million tokens, set ${r.updatedAt.toISOString()})`);
    }
    io.out(`${rows.length} operator price${rows.length === 1 ? "" : "s"}`);
    return 0;
  }
  if (sub === "delete" && args.length === 2) {
    const [provider, model] = args as [string, string];
    const gone = await db.delete(operatorPrices).where(and(eq(operatorPrices.provider, provider), eq(operatorPrices.model, model))).returning({ p: operatorPrices.provider });
    if (!gone.length) { io.err(`No operator price for ${provider} ${model}.`); return 1; }
    await effects.pricesChanged();
    io.out(`Deleted the operator price of ${provider} ${model}; the catalog's price (or PRICES_FILE's) applies again.`);
    return 0;
  }
  if (sub !== "set" || args.length < 2) { io.err(USAGE); return 2; }
  const [provider, model, ...flags] = args as [string, string, ...string[]];
  const entry: Record<string, unknown> = { provider, model };
  for (let i = 0; i < flags.length; i += 2) {
    const field = PRICE_FLAGS[flags[i]!];
    const value = flags[i + 1];
    if (!field || value === undefined) { io.err(`Unknown or incomplete option ${JSON.stringify(flags[i])}.\n${USAGE}`); return 2; }
    const n = Number(value);
    if (value.trim() === "" || !Number.isFinite(n)) { io.err(`${flags[i]} must be a number of USD per million tokens, not ${JSON.stringify(value)}.`); return 2; }
    entry[field] = n;
  }
  const parsed = operatorPriceEntry.safeParse(entry);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    const flag = Object.entries(PRICE_FLAGS).find(([, f]) => f === i.path[0])?.[0];
    io.err(i.code === "invalid_type" && i.input === undefined && flag ? `${flag} is required.` : `${flag ?? i.path.join(".")}: ${i.message}.`);
    return 2;
  }
  const e = parsed.data;
  const values = {
    inputPerMtok: e.input_per_mtok,
    outputPerMtok: e.output_per_mtok,
    cacheReadPerMtok: e.cache_read_per_mtok ?? null,
    cacheWritePerMtok: e.cache_write_per_mtok ?? null,
    cacheWrite1hPerMtok: e.cache_write_1h_per_mtok ?? null,
    updatedAt: new Date(),
  };
  await db.insert(operatorPrices).values({ provider: e.provider, model: e.model, ...values })
    .onConflictDoUpdate({ target: [operatorPrices.provider, operatorPrices.model], set: values });
  await effects.pricesChanged();
  io.out(`Priced ${e.provider} ${e.model}: input ${e.input_per_mtok}, output ${e.output_per_mtok} USD per million tokens${e.cache_read_per_mtok !== undefined ? `, cache read ${e.cache_read_per_mtok}` : ""}${e.cache_write_per_mtok !== undefined ? `, cache write ${e.cache_write_per_mtok}` : ""}${e.cache_write_1h_per_mtok !== undefined ? `, 1-hour cache write ${e.cache_write_1h_per_mtok}` : ""}. Every gateway uses it from now on.`);
  return 0;
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
  if (cmd === "prices") return pricesCommand(db, rest, io, effects);
  if (cmd === undefined || cmd === "help" || cmd === "--help") { io.out(USAGE); return 0; }
  io.err(USAGE);
  return 2;
}
