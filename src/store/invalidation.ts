// Cache invalidation across gateway instances: management publishes, the inference key cache
// listens. Over Redis pub/sub when REDIS_URL is set, in-process otherwise.
import type { Ctx } from "../context.ts";

const CHANNEL = "gw:invalidate";

export type Invalidation =
  /** One routing key changed (revoked, regenerated, PATCHed): drop the entry for this key hash. */
  | { kind: "key"; hash: string }
  /** Something a key's lanes reference changed (credential, bridge, sub session, account): drop all of the account's keys. */
  | { kind: "account"; accountId: string };

export async function publishInvalidation(ctx: Ctx, msg: Invalidation): Promise<void> {
  // The local instance first, synchronously, so the next request here never sees a stale key.
  const local = ctx.services.localInvalidation as ((m: Invalidation) => void) | undefined;
  local?.(msg);
  await ctx.kv.publish(CHANNEL, JSON.stringify(msg));
}

export async function onInvalidation(ctx: Ctx, handler: (msg: Invalidation) => void): Promise<void> {
  ctx.services.localInvalidation = handler;
  await ctx.kv.subscribe(CHANNEL, (raw) => {
    try {
      handler(JSON.parse(raw) as Invalidation);
    } catch {
      ctx.log.warn("ignored a malformed invalidation message");
    }
  });
}
