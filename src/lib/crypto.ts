// Hashing, random tokens and AES-256-GCM for secrets at rest. Imports nothing from src/.
import { createCipheriv, createDecipheriv, createHash, randomBytes, randomInt, timingSafeEqual } from "node:crypto";

export function sha256Hex(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

const ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/** A URL-safe random string of `len` characters from a 62-letter alphabet (≈5.95 bits each). */
export function randomToken(len: number): string {
  const bytes = randomBytes(len * 2);
  let out = "";
  for (let i = 0; out.length < len && i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b < 248) out += ALPHABET[b % 62];
  }
  while (out.length < len) out += ALPHABET[randomInt(62)];
  return out;
}

export function randomDigits(n: number): string {
  let s = "";
  for (let i = 0; i < n; i++) s += String(randomInt(10));
  return s;
}

export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

/** Last four characters: the only part of a secret ever shown or logged. */
export function fingerprint(secret: string): string {
  return secret.slice(-4);
}

/** Parses a 32-byte key given as 64 hex characters or base64. Returns null when malformed. */
export function parseKey(text: string): Buffer | null {
  const t = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(t)) return Buffer.from(t, "hex");
  const b = Buffer.from(t, "base64");
  return b.length === 32 ? b : null;
}

/**
 * AES-256-GCM with associated data: the row's identity (e.g. `credentials:<id>`) is bound to the
 * ciphertext, so a ciphertext copied onto another row fails to decrypt.
 * Format: `v1.<iv b64url>.<tag b64url>.<ciphertext b64url>`.
 */
export function encrypt(key: Buffer, plaintext: string, aad: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv("aes-256-gcm", key, iv);
  c.setAAD(Buffer.from(aad));
  const ct = Buffer.concat([c.update(plaintext, "utf8"), c.final()]);
  return `v1.${iv.toString("base64url")}.${c.getAuthTag().toString("base64url")}.${ct.toString("base64url")}`;
}

export function decrypt(key: Buffer, box: string, aad: string): string {
  const [v, iv, tag, ct] = box.split(".");
  if (v !== "v1" || !iv || !tag || ct === undefined) throw new Error("ciphertext format not recognised");
  const d = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64url"));
  d.setAAD(Buffer.from(aad));
  d.setAuthTag(Buffer.from(tag, "base64url"));
  return Buffer.concat([d.update(Buffer.from(ct, "base64url")), d.final()]).toString("utf8");
}
