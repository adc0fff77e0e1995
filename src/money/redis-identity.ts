// Which Redis servers hold the ledger: the masters' run ids. A run id is new after a restart and
// different on a promoted replica, so a change means writes the previous master acknowledged may
// be gone (a replica lags its master; a restart keeps at most what AOF had flushed). The ledger
// then re-asserts its requests in flight exactly as after an empty restart: every step of that is
// idempotent, so re-asserting onto a master that lost nothing changes nothing.
import { Cluster } from "ioredis";
import type Redis from "ioredis";

/** The run ids of every master `r` writes to, sorted and joined (one id without a Cluster). */
export async function masterIdentity(r: Redis): Promise<string> {
  const nodes = (r as unknown) instanceof Cluster ? (r as unknown as Cluster).nodes("master") : [r];
  const ids = await Promise.all(nodes.map(async (n) => /run_id:([0-9a-f]+)/.exec(String(await n.info("server")))?.[1] ?? "?"));
  return ids.sort().join(",");
}
