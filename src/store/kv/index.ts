import { MemoryKV } from "./memory.ts";
import { RedisKV } from "./redis.ts";
import type { KV } from "./types.ts";

export type { KV, ReserveResult } from "./types.ts";

export async function openKv(redisUrl: string | undefined): Promise<KV> {
  if (!redisUrl) return new MemoryKV();
  const kv = new RedisKV(redisUrl);
  await kv.ping(); // fail at start, naming the store, rather than on the first request
  return kv;
}
