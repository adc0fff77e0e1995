// The gateway's two transactional mails. Plain text: they are read by humans, and sometimes by
// the agent that asked for them, so every fact is a plain sentence.
import type { MailMessage } from "./mailer.ts";

export function signupCodeMail(p: { email: string; code: string; ttlSeconds: number; existingAccount: boolean; siteUrl: string }): MailMessage {
  const minutes = Math.max(1, Math.round(p.ttlSeconds / 60));
  const what = p.existingAccount
    ? `An AI agent asked to sign in to the Model Gateway account of ${p.email}.`
    : `An AI agent started a signup for a Model Gateway account for ${p.email}.`;
  return {
    kind: "signup_code",
    to: p.email,
    subject: p.existingAccount ? "Your Model Gateway sign-in code" : "Your Model Gateway signup code",
    text: [
      what,
      "",
      `Verification code: ${p.code}`,
      "",
      `The code works once and expires in ${minutes} minute${minutes === 1 ? "" : "s"}. Give it to the agent only if you asked it to ${p.existingAccount ? "use your account" : "create the account"}.`,
      "If you did not expect this email, ignore it: nothing happens without the code.",
      "",
      `Model Gateway, ${p.siteUrl}`,
    ].join("\n"),
  };
}

export function ownerNoticeMail(p: { email: string; accountId: string; checkoutUrl: string; localCheckoutUrl: string; priceUsd: number; expiresAt: Date | null; siteUrl: string }): MailMessage {
  const deadline = p.expiresAt ? p.expiresAt.toISOString() : null;
  return {
    kind: "owner_notice",
    to: p.email,
    subject: deadline ? `Activate your Model Gateway account before ${deadline}` : "Activate your Model Gateway account",
    text: [
      `An AI agent created a Model Gateway account for ${p.email} (account ${p.accountId}).`,
      "",
      `To let it manage routing keys, activate the membership ($${p.priceUsd} per month) here:`,
      p.checkoutUrl,
      ...(p.checkoutUrl !== p.localCheckoutUrl ? ["", `That payment link works for 24 hours. After that, this page gives a fresh one: ${p.localCheckoutUrl}`] : []),
      "",
      deadline
        ? `If the membership is not activated by ${deadline} (UTC), the account and everything in it are removed, and its tokens stop working.`
        : "The account stays limited to its status page until the membership is activated.",
      "If you did not ask an agent to do this, ignore this email.",
      "",
      `Model Gateway, ${p.siteUrl}`,
    ].join("\n"),
  };
}
