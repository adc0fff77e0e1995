// Operator prices (CONTRACT §9): the gateway's operator, never a tenant, can price a model the
// catalog lacks or prices wrong, per provider and model. Two sources, both the operator's:
//   - PRICES_FILE, a JSON file read at start (an invalid file fails the boot, naming what is wrong)
//     and again on SIGHUP (an invalid file then is logged and the previous prices stay);
//   - the `operator_prices` table, written by the admin command (`npm run admin -- prices set …`)
//     and read by every instance at start and again when the admin command tells them
//     (the invalidation channel, store/invalidation.ts: kind `prices`).
// For the same provider and model the table's entry wins over the file's: it is the later act,
// made for the whole fleet at once. An operator price wins over the catalog's (pricing.ts).
// Lookups are two Map reads per priced attempt; nothing here runs a query on the request path.
import { readFileSync } from "node:fs";
import { z } from "zod";
import type { Db } from "../store/db/client.ts";
import { operatorPrices } from "../store/db/schema/index.ts";
import { onInvalidation } from "../store/invalidation.ts";
import type { Base } from "../base.ts";
import { loggableError } from "../errors.ts";
import type { FlatPrice } from "./pricing.ts";

const perMtok = (name: string) => z.number({ error: `\`${name}\` must be a number of USD per million tokens` }).finite().min(0, `\`${name}\` cannot be negative`);

/** One price as the file and the admin command write it (USD per million tokens; the cache prices optional). */
export const operatorPriceEntry = z.strictObject({
  provider: z.string().min(1).max(100),
  model: z.string().min(1).max(300),
  input_per_mtok: perMtok("input_per_mtok"),
  output_per_mtok: perMtok("output_per_mtok"),
  cache_read_per_mtok: perMtok("cache_read_per_mtok").optional(),
  cache_write_per_mtok: perMtok("cache_write_per_mtok").optional(),
  cache_write_1h_per_mtok: perMtok("cache_write_1h_per_mtok").optional(),
});
export type OperatorPriceEntry = z.output<typeof operatorPriceEntry>;

const pricesFile = z.strictObject({ prices: z.array(operatorPriceEntry).max(100_000) });

export class PricesFileError extends Error {
  override name = "PricesFileError";
}

/** Reads and checks a prices file; throws PricesFileError saying what is wrong and where. */
export function readPricesFile(path: string): OperatorPriceEntry[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new PricesFileError(`PRICES_FILE ${path} cannot be read: ${e instanceof Error ? e.message : String(e)}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new PricesFileError(`PRICES_FILE ${path} is not JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  const r = pricesFile.safeParse(json);
  if (!r.success) {
    const i = r.error.issues[0]!;
    const at = i.path.length ? i.path.join(".") : "(the top level)";
    throw new PricesFileError(`PRICES_FILE ${path} is invalid at ${at}: ${i.message}. Expected {"prices": [{"provider", "model", "input_per_mtok", "output_per_mtok", "cache_read_per_mtok"?, "cache_write_per_mtok"?, "cache_write_1h_per_mtok"?}]}.`);
  }
  const seen = new Set<string>();
  for (const [i, e] of r.data.prices.entries()) {
    const k = `${e.provider}\u0000${e.model}`;
    if (seen.has(k)) throw new PricesFileError(`PRICES_FILE ${path} prices ${e.provider} ${e.model} twice (entry ${i}); keep one.`);
    seen.add(k);
  }
  return r.data.prices;
}

/** An entry → per-token prices; cache prices the operator left out follow the catalog's rules (reads and writes at input, 1-hour writes at 2× input). */
export function flatPriceOf(e: Pick<OperatorPriceEntry, "input_per_mtok" | "output_per_mtok" | "cache_read_per_mtok" | "cache_write_per_mtok" | "cache_write_1h_per_mtok">): FlatPrice {
  const input = e.input_per_mtok;
  return {
    input: input / 1e6,
    output: e.output_per_mtok / 1e6,
    cacheRead: (e.cache_read_per_mtok ?? input) / 1e6,
    cacheWrite: (e.cache_write_per_mtok ?? input) / 1e6,
    cacheWrite1h: (e.cache_write_1h_per_mtok ?? 2 * input) / 1e6,
  };
}

type Table = Map<string, Map<string, FlatPrice>>;

function tableOf(entries: OperatorPriceEntry[]): Table {
  const t: Table = new Map();
  for (const e of entries) {
    let byModel = t.get(e.provider);
    if (!byModel) t.set(e.provider, (byModel = new Map()));
    byModel.set(e.model, flatPriceOf(e));
  }
  return t;
}

/** What pricing reads of the operator's prices: one lookup per priced attempt. */
export interface OperatorPriceLookup {
  /** The operator's price of `model` on `provider` (the lane's provider id), or null. */
  get(provider: string, model: string): FlatPrice | null;
}

/** This instance's operator prices: the file's and the table's, swapped whole on a reload. */
export class PriceBook implements OperatorPriceLookup {
  private file: Table = new Map();
  private db: Table = new Map();
  /** How many entries each source holds (the log lines and the admin command's answer). */
  counts = { file: 0, db: 0 };

  get(provider: string, model: string): FlatPrice | null {
    return this.db.get(provider)?.get(model) ?? this.file.get(provider)?.get(model) ?? null;
  }

  setFile(entries: OperatorPriceEntry[]): void {
    this.file = tableOf(entries);
    this.counts.file = entries.length;
  }

  setDb(entries: OperatorPriceEntry[]): void {
    this.db = tableOf(entries);
    this.counts.db = entries.length;
  }

  /** True when the operator priced `model` on `provider` (the dashboard's unpriced-models check). */
  has(provider: string, model: string): boolean {
    return this.get(provider, model) !== null;
  }
}

/** Every row of the operator_prices table, as entries. */
export async function loadDbPrices(db: Db): Promise<OperatorPriceEntry[]> {
  const rows = await db.select().from(operatorPrices);
  return rows.map((r) => ({
    provider: r.provider,
    model: r.model,
    input_per_mtok: r.inputPerMtok,
    output_per_mtok: r.outputPerMtok,
    cache_read_per_mtok: r.cacheReadPerMtok ?? undefined,
    cache_write_per_mtok: r.cacheWritePerMtok ?? undefined,
    cache_write_1h_per_mtok: r.cacheWrite1hPerMtok ?? undefined,
  }));
}

export interface OperatorPrices extends OperatorPriceLookup {
  book: PriceBook;
  /** SIGHUP: reads PRICES_FILE again; an invalid file is logged and the previous prices stay. Returns whether it took. */
  reloadFile(): boolean;
  /** Reads the table again (another instance or the admin command changed it). */
  reloadDb(): Promise<void>;
}

/**
 * Loads the operator's prices at boot: PRICES_FILE (a PricesFileError fails the boot) and the
 * table, and listens for the admin command's changes.
 */
export async function startOperatorPrices(base: Pick<Base, "config" | "db" | "dbh" | "kv" | "log">): Promise<OperatorPrices> {
  const book = new PriceBook();
  const path = base.config.PRICES_FILE;
  if (path) book.setFile(readPricesFile(path));
  const reloadDb = async () => {
    try {
      book.setDb(await loadDbPrices(base.db));
    } catch (e) {
      base.log.warn({ err: loggableError(e) }, "operator prices not reloaded from the database; the previous ones stay");
    }
  };
  book.setDb(await loadDbPrices(base.db));
  if (path || book.counts.db) base.log.info({ file: path ?? null, fileEntries: book.counts.file, tableEntries: book.counts.db }, "operator prices loaded");
  await onInvalidation(base, (m) => {
    if (m.kind === "prices" || m.kind === "all") void reloadDb();
  });
  return {
    book,
    get: (provider, model) => book.get(provider, model),
    reloadDb,
    reloadFile() {
      if (!path) {
        base.log.info("SIGHUP: no PRICES_FILE is set; operator prices unchanged");
        return false;
      }
      try {
        book.setFile(readPricesFile(path));
      } catch (e) {
        base.log.error({ file: path, err: e instanceof Error ? e.message : String(e) }, "SIGHUP: PRICES_FILE not reloaded, the previous prices stay");
        return false;
      }
      base.log.info({ file: path, fileEntries: book.counts.file }, "SIGHUP: operator prices reloaded from PRICES_FILE");
      return true;
    },
  };
}
