// Which addresses may own an account: syntactically valid, not on the disposable-domain list
// maintained by the `mailchecker` package (subdomains of a listed domain count as listed).
import { createRequire } from "node:module";

// The package holds its disposable-domain list as one Set of ~55,000 names (~14 MB of RSS): it is
// required on the first address judged, not at boot (the relay never needs it; idle memory has a
// budget, README). Synchronous, so judging an address stays synchronous.
type MailChecker = { blacklist(): Set<string>; isValid(email: string): boolean };
let mailchecker: MailChecker | null = null;
const checker = (): MailChecker => (mailchecker ??= createRequire(import.meta.url)("mailchecker") as MailChecker);

export const EMAIL_MAX_LENGTH = 254;

/** Trimmed and lower-cased: one mailbox, one account, whatever case the agent typed. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export function isDisposable(email: string): boolean {
  const at = email.lastIndexOf("@");
  if (at < 0) return false;
  const list = checker().blacklist();
  let domain = email.slice(at + 1).toLowerCase();
  for (;;) {
    if (list.has(domain)) return true;
    const dot = domain.indexOf(".");
    if (dot < 0) return false;
    domain = domain.slice(dot + 1);
  }
}

export type EmailVerdict = "ok" | "invalid" | "disposable";

export function judgeEmail(email: string): EmailVerdict {
  if (email.length === 0 || email.length > EMAIL_MAX_LENGTH) return "invalid";
  if (isDisposable(email)) return "disposable";
  // isValid = well-formed and not disposable; disposable was ruled out above.
  return checker().isValid(email) ? "ok" : "invalid";
}
