// GET /v1/organizations/me: the one management call that works while the plan is `free`.
import { readQuery } from "../zod-input.ts";
import { noQuery } from "../tokens/model.ts";
import { authenticate, type GuardDeps } from "../guard.ts";
import { accountView } from "./model.ts";

export async function getMe(ctx: GuardDeps, request: Request) {
  const caller = await authenticate(ctx, request, { write: false, allowUnpaid: true });
  readQuery(request, noQuery);
  return accountView(ctx, caller);
}
