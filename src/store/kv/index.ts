import { MemoryKV } from "./memory.ts";
import { RedisKV } from "./redis.ts";
import type { KV } from "./types.ts";
import { resolve } from "node:path";
import type { Config, RedisTarget } from "../../config.ts";
import { sha256Hex } from "../../lib/crypto.ts";

export type { KV, ReserveResult } from "./types.ts";

export async function openKv(target: RedisTarget | null): Promise<KV> {
  if (!target) return new MemoryKV();
  const kv = new RedisKV(target);
  await kv.ping(); // fail at start, naming the store, rather than on the first request
  return kv;
}

/**
 * The prefix of the shared store's keys that belong to one database's fleet (`gw:d:<hash>`): the
 * instances of one deployment share it; gateways on other databases sharing the Redis do not.
 */
export function fleetNamespace(config: Pick<Config, "DATABASE_URL" | "DATA_DIR">): string {
  const db = config.DATABASE_URL ? config.DATABASE_URL.replace(/\/\/[^@/]*@/, "//") : `pglite:${resolve(config.DATA_DIR)}`;
  return `gw:d:${sha256Hex(db).slice(0, 12)}`;
}
