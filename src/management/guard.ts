// Account-token authentication for management paths, in the order of CONTRACT §8:
// 401 (no token / unknown token) → 410 (removed account) → 403 (rk_ on a write) → 402 (unpaid).
import { and, eq, isNull } from "drizzle-orm";
import type { Base } from "../base.ts";
import type { Services } from "../context.ts";
import { GatewayError } from "../errors.ts";
import { sha256Hex } from "../lib/crypto.ts";
import { bearer } from "../http/request.ts";
import { readWithin } from "../store/db/deadline.ts";
import { accounts, accountTokens } from "../store/db/schema/index.ts";
import { paymentBlock, relayMessage } from "./payment.ts";

export type Account = typeof accounts.$inferSelect;
export type AccountToken = typeof accountTokens.$inferSelect;

export interface Caller {
  account: Account;
  token: AccountToken;
}

/** What the guard uses: the stores and settings, and this gateway's record of token touches. */
export type GuardDeps = Base & { services: Pick<Services, "accountTokenTouches"> };

export interface GuardOptions {
  /** POST, PATCH, DELETE: an `rk_` token gets 403 read_only_token. */
  write: boolean;
  /** Paths that work while unpaid: GET /v1/organizations/me, listing and revoking account tokens. */
  allowUnpaid?: boolean;
}

export const noToken = () =>
  new GatewayError(401, "Send an account token in the Authorization header (`Authorization: Bearer sk_…`). Get one with the agent signup flow.");
export const invalidAccountToken = () =>
  new GatewayError(401, "This account token is unknown or was revoked. Sign in again with the agent signup flow to get a new one.", { code: "invalid_account_token" });
export const accountExpired = () =>
  new GatewayError(410, "This account was removed because its membership was not activated in time. Sign up again with the same email to start over.", { code: "account_expired" });

/** True when an unpaid account has passed its deadline (the expiry job may not have run yet). */
export function isExpired(account: Account, now = Date.now()): boolean {
  if (account.removedAt) return true;
  return account.plan === "free" && account.accountExpiresAt !== null && account.accountExpiresAt.getTime() <= now;
}

/**
 * The token read every management call starts with. Past this, Postgres counts as unreachable
 * (500 server_error) and the call goes no further: with a frozen database no management write is
 * ever started, so none can commit after its client was told it failed.
 */
export const TOKEN_READ_MS = 2_000;

/** A token's last_used_at is written at most this often: a busy token costs one UPDATE a minute, not one per call. */
export const TOKEN_TOUCH_MS = 60_000;


/**
 * Records that `token` was used now. Fire-and-forget, off the answer's path; skipped while this
 * gateway wrote it, or the row read in the same call shows it (another instance wrote it), within
 * TOKEN_TOUCH_MS.
 */
export function touchAccountToken(ctx: GuardDeps, token: AccountToken, now = Date.now()): void {
  const touches = ctx.services.accountTokenTouches;
  const last = Math.max(touches.get(token.id) ?? 0, token.lastUsedAt?.getTime() ?? 0);
  if (now - last < TOKEN_TOUCH_MS) return;
  touches.set(token.id, now);
  ctx.db.update(accountTokens).set({ lastUsedAt: new Date(now) }).where(eq(accountTokens.id, token.id))
    .catch((e: unknown) => ctx.log.warn({ tokenId: token.id, err: e instanceof Error ? e.message : String(e) }, "account token last_used_at update failed"));
}

export async function authenticate(ctx: GuardDeps, request: Request, opts: GuardOptions): Promise<Caller> {
  const token = bearer(request);
  if (!token) throw noToken();
  if (!token.startsWith("sk_") && !token.startsWith("rk_")) throw invalidAccountToken();
  const rows = await readWithin(
    ctx.db
      .select({ token: accountTokens, account: accounts })
      .from(accountTokens)
      .innerJoin(accounts, eq(accounts.id, accountTokens.accountId))
      .where(and(eq(accountTokens.tokenHash, sha256Hex(token)), isNull(accountTokens.revokedAt)))
      .limit(1)
      .execute(),
    TOKEN_READ_MS,
    "account token read",
  );
  const row = rows[0];
  if (!row) throw invalidAccountToken();
  if (isExpired(row.account)) throw accountExpired();
  touchAccountToken(ctx, row.token);
  if (opts.write && row.token.scope !== "read_write") {
    throw new GatewayError(403, "This is a read-only account token (rk_). Use a read_write token (sk_) for POST, PATCH and DELETE.", { code: "read_only_token" });
  }
  if (!opts.allowUnpaid && row.account.plan !== "pro") {
    throw new GatewayError(402, "This account's membership is not active yet. A human must complete checkout at the payment.checkout_url; until then only GET /v1/organizations/me and listing or revoking account tokens work.", {
      code: "payment_required",
      extra: { message: relayMessage(ctx, row.account), payment: paymentBlock(ctx, row.account) },
    });
  }
  return row;
}
