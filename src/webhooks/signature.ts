// The Gateway-Signature header of every webhook (CONTRACT §8), Stripe-style:
//   Gateway-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>" under the account's secret>
// Each attempt is signed afresh (a retry a day later still passes a receiver's 5-minute window).
import { createHmac } from "node:crypto";
import { safeEqual } from "../lib/crypto.ts";

export const SIGNATURE_HEADER = "Gateway-Signature";
/** Receivers reject a timestamp older than this (CONTRACT §8). */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

export function signatureHeader(secret: string, body: string, unixSeconds = Math.floor(Date.now() / 1000)): string {
  const mac = createHmac("sha256", secret).update(`${unixSeconds}.${body}`).digest("hex");
  return `t=${unixSeconds},v1=${mac}`;
}

/** The check a receiver runs (kept here so the docs' recipe and the gateway agree). */
export function verifySignature(secret: string, body: string, header: string | null, nowSeconds = Math.floor(Date.now() / 1000)): boolean {
  if (!header) return false;
  const parts = Object.fromEntries(header.split(",").map((p) => p.split("=", 2) as [string, string]));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || Math.abs(nowSeconds - t) > SIGNATURE_TOLERANCE_SECONDS || !parts.v1) return false;
  return safeEqual(createHmac("sha256", secret).update(`${t}.${body}`).digest("hex"), parts.v1);
}
