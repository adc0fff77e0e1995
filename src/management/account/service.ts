// GET /v1/organizations/me: the one management call that works while the plan is `free`.
import type { Ctx } from "../../context.ts";
import { onlyQuery, queryOf } from "../../http/request.ts";
import { authenticate } from "../guard.ts";
import { accountView } from "./model.ts";

export async function getMe(ctx: Ctx, request: Request) {
  const caller = await authenticate(ctx, request, { write: false, allowUnpaid: true });
  onlyQuery(queryOf(request), []);
  return accountView(ctx, caller);
}
