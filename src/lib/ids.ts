import { randomToken } from "./crypto.ts";

/** Prefixed opaque ids: `acct_…`, `rkey_…`, `cred_…`. The prefix tells a reader what it names. */
export function newId(prefix: string): string {
  return `${prefix}_${randomToken(20)}`;
}
