// GET /v1/organizations/me: the one management call that works while the plan is `free`.
import type { Ctx } from "../../context.ts";
import { readQuery } from "../zod-input.ts";
import { noQuery } from "../tokens/model.ts";
import { authenticate } from "../guard.ts";
import { accountView } from "./model.ts";

export async function getMe(ctx: Ctx, request: Request) {
  const caller = await authenticate(ctx, request, { write: false, allowUnpaid: true });
  readQuery(request, noQuery);
  return accountView(ctx, caller);
}
