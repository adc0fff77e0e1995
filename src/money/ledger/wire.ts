// The ledger's Redis boundary: how its typed records are written into script arguments and
// in-flight entries, and read back (the scripts are in store/kv/ledger-scripts.ts).
import type { EntryFacts, FactsJson, InflightEntry, Settlement } from "./types.ts";

/** An in-flight entry's stored value: "<facts JSON>|<reserved nano>". */
export const entryValue = (facts: FactsJson, nano: number): string => `${facts}|${nano}`;

/** Reads an entry's value back; null when it is not one (foreign or damaged). */
export function parseEntry(value: string): { facts: EntryFacts; nano: number } | null {
  const cut = value.lastIndexOf("|");
  if (cut < 0) return null;
  try {
    return { facts: JSON.parse(value.slice(0, cut)) as EntryFacts, nano: Number(value.slice(cut + 1)) || 0 };
  } catch {
    return null;
  }
}

/** LEDGER's entries argument: "id\tentry|grant\n" lines. */
export function packEntries(enters: readonly InflightEntry[]): string {
  let out = "";
  for (const e of enters) out += `${e.id}\t${entryValue(e.facts, e.nano)}\n`;
  return out;
}

/**
 * LEDGER's settlements argument: "id\tactual\treserved\tlease\n" lines; lease is empty for a
 * request with its own entry, the lease's id for one admitted from a lease, `*` for a lease's end.
 */
export function packSettles(settles: readonly Settlement[]): string {
  let out = "";
  for (const s of settles) out += `${s.id}\t${s.actual}\t${s.reserved}\t${s.closes ? "*" : (s.lease ?? "")}\n`;
  return out;
}

/** REASSERT's arguments: (request id, entry, nano) triples. */
export function reassertArgs(entries: readonly InflightEntry[]): Array<string | number> {
  const args: Array<string | number> = [];
  for (const e of entries) args.push(e.id, entryValue(e.facts, e.nano), e.nano);
  return args;
}

/** A list of ids for the scripts: "id\n" lines. */
export function packIds(ids: Iterable<string>): string {
  let out = "";
  for (const id of ids) out += `${id}\n`;
  return out;
}

/** ADD_REBUILT's argument: "id\tactual\n" lines. */
export function packAdds(settles: readonly Settlement[]): string {
  let out = "";
  for (const s of settles) out += `${s.id}\t${s.actual}\n`;
  return out;
}
