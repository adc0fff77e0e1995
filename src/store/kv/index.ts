import { MemoryKV } from "./memory.ts";
import { RedisKV } from "./redis.ts";
import type { KV } from "./types.ts";
import type { RedisTarget } from "../../config.ts";

export type { KV, ReserveResult } from "./types.ts";

export async function openKv(target: RedisTarget | null): Promise<KV> {
  if (!target) return new MemoryKV();
  const kv = new RedisKV(target);
  await kv.ping(); // fail at start, naming the store, rather than on the first request
  return kv;
}
