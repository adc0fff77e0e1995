// The AES-256-GCM key for secrets at rest. GATEWAY_SECRET_KEY wins; in development a key is
// generated once into DATA_DIR; in production without it, every operation that needs the key
// answers 500 env_missing (the rest of the gateway keeps serving).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import type { Config } from "./config.ts";
import { ConfigError } from "./config.ts";
import { decrypt, encrypt, parseKey } from "./lib/crypto.ts";
import { envMissing, GatewayError } from "./errors.ts";

export interface SecretBox {
  /** `aad` is the row identity, e.g. `credentials:<id>`. */
  seal(plaintext: string, aad: string): string;
  open(ciphertext: string, aad: string): string;
  readonly available: boolean;
}

export function loadSecretBox(config: Config): SecretBox {
  let key: Buffer | null = null;
  if (config.GATEWAY_SECRET_KEY) {
    key = parseKey(config.GATEWAY_SECRET_KEY);
    if (!key) throw new ConfigError("Invalid configuration:\n  GATEWAY_SECRET_KEY: must be 32 bytes as 64 hex characters or base64");
  } else if (!config.production) {
    const file = join(config.DATA_DIR, "secret.key");
    if (existsSync(file)) key = parseKey(readFileSync(file, "utf8"));
    if (!key) {
      mkdirSync(config.DATA_DIR, { recursive: true });
      writeFileSync(file, randomBytes(32).toString("hex") + "\n", { mode: 0o600 });
      key = parseKey(readFileSync(file, "utf8"));
    }
  }
  const need = (): Buffer => {
    if (!key) throw envMissing("GATEWAY_SECRET_KEY");
    return key;
  };
  return {
    available: key !== null,
    seal(plaintext, aad) {
      const k = need();
      try {
        return encrypt(k, plaintext, aad);
      } catch {
        throw new GatewayError(500, "Encrypting the secret failed; nothing was stored. Retry the request.", { code: "encrypt_failed" });
      }
    },
    open(ciphertext, aad) {
      return decrypt(need(), ciphertext, aad);
    },
  };
}
