// The Account object (SPEC "Account"): who the token belongs to, and while unpaid, how to pay.
import type { Base } from "../../base.ts";
import type { Caller } from "../guard.ts";
import { paymentBlock, relayMessage } from "../payment.ts";

export function accountView(ctx: Base, { account, token }: Caller) {
  const view: Record<string, unknown> = {
    id: account.id,
    email: account.email,
    plan: account.plan,
    token_scope: token.scope,
    token_label: token.label,
  };
  if (account.plan !== "pro") {
    view.payment = paymentBlock(ctx, account);
    view.message = relayMessage(ctx, account);
  }
  return view;
}
