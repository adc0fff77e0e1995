// Signup throttles, counted in the KV so every gateway instance sharing the Redis sees one count:
// SIGNUP_IP_LIMIT_PER_HOUR agent-signup requests per client IP (an IPv6 client per /64), and 3
// codes per email per hour.
// Fixed one-hour windows that start at the first request.
import type { Base } from "../base.ts";
import { sha256Hex } from "../lib/crypto.ts";
import { ipLimitGroup } from "../http/ip-group.ts";
import { signupError } from "./model.ts";

export const CODES_PER_EMAIL_PER_HOUR = 3;
const HOUR = 3600;

const ipKey = (ip: string) => `gw:signup:ip:${ipLimitGroup(ip)}`;
// Hashed so the KV never holds a list of addresses.
const emailKey = (email: string) => `gw:signup:email:${sha256Hex(email)}`;

/** Counts this request against the caller's IP (IPv6: its /64); 429 once the hour's allowance is used. */
export async function countSignupFromIp(ctx: Base, ip: string): Promise<void> {
  const n = await ctx.kv.incrWindow(ipKey(ip), HOUR);
  if (n > ctx.config.SIGNUP_IP_LIMIT_PER_HOUR) {
    throw signupError(429, "Too many signup requests from this network address. Wait an hour, then try again.");
  }
}

/** Counts one code for the email; 429 past 3 in the hour. */
export async function countCodeForEmail(ctx: Base, email: string): Promise<void> {
  const n = await ctx.kv.incrWindow(emailKey(email), HOUR);
  if (n > CODES_PER_EMAIL_PER_HOUR) {
    throw signupError(429, `At most ${CODES_PER_EMAIL_PER_HOUR} codes are sent per email per hour. Use the newest code already sent, or wait an hour.`);
  }
}

/** Gives the code back when its mail could not be sent: a failed delivery is not a code the human got. */
export async function refundCodeForEmail(ctx: Base, email: string): Promise<void> {
  await ctx.kv.adjust(emailKey(email), -1, HOUR);
}
