// The ledger's records as its modules pass them to each other. They become strings only at the
// Redis boundary (wire.ts): the packed arguments of the LEDGER and REASSERT scripts and the
// in-flight entries' values.
import type { BudgetedKey } from "../counters.ts";

/** What an in-flight entry remembers to write an `interrupted` record for it. */
export interface EntryFacts {
  /** instance */ i: string;
  /** month */ m: string;
  /** started at (ms) */ t: number;
  /** account */ a: string;
  /** endpoint */ e: string;
  /** provider (the key's first lane) */ p: string;
  /** model asked for */ md: string | null;
  /** seat traffic */ s: boolean;
  /** the request id the client saw */ r: string | null;
  /**
   * A request admitted from a budget lease (leases.ts): the lease's entry id. Its own entry holds
   * nothing in the counter (its worst case is held by the lease's entry); `w` is that worst case.
   */
  l?: string;
  /** The worst case (nano) a lease-admitted request took from its lease: its `interrupted` cost. */
  w?: number;
  /** This entry is a budget lease: what it still holds goes back to the counter when its instance dies. */
  ls?: 1;
  /** The request's tags (CONTRACT §9), written on its `interrupted` record. */
  tg?: string[];
}

/**
 * An entry's facts already in their stored form (JSON of EntryFacts): built once per request from
 * a per-key prefix (facts.ts), since it is written as is by the admission script.
 */
export type FactsJson = string & { readonly __facts: unique symbol };

/** One request (or a /blitz share) in flight: its facts and what it holds in the counter. */
export interface InflightEntry {
  id: string;
  facts: FactsJson;
  /** Reserved nano-dollars (counted in the key's month counter until settled). */
  nano: number;
}

/** What this instance keeps of each of its entries, to re-assert them after Redis lost its state. */
export interface LocalEntry extends InflightEntry {
  key: BudgetedKey;
  month: string;
}

/**
 * A request's end: its real cost replaces what it reserved. A request served from a budget lease
 * (leases.ts) names it in `lease`: its cost moves from the lease's entry to the records. A lease's
 * own end (`closes`) gives what the lease did not use back to the counter.
 */
export interface Settlement {
  /** The money call's uid (its in-flight entry), or the lease's when it `closes`. */
  id: string;
  actual: number;
  reserved: number;
  /** The lease the request was admitted from. */
  lease?: string;
  closes?: true;
}

/** A key's month's writes of one batch. */
export interface WriteGroup {
  key: BudgetedKey;
  month: string;
  enters: InflightEntry[];
  settles: Settlement[];
}

/** The settlements sent in the same batch as a set of usage records (unacked.ts keeps them). */
export interface SentSettles {
  key: BudgetedKey;
  month: string;
  settles: Settlement[];
}

/** The ledger's shared keys, named per deployment (ledger/index.ts). */
export interface LedgerKeys {
  stream: string;
  instances: string;
  keyset: string;
  epoch: string;
  lock: string;
}

/** The usage stream's consumer group. */
export const GROUP = "gw-usage";
