// Structured JSON logs (pino). Secrets never reach a log line: headers that carry them are
// redacted, and code logs prefixes and fingerprints only. A field named `code` is an error code
// (invalid_api_key, upstream_error…) and stays readable; a signup code is never logged.
import pino, { type DestinationStream, type Logger } from "pino";

export type { Logger };

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      redact: {
        paths: [
          "authorization", "*.authorization", "headers.authorization", "req.headers.authorization",
          "api_key", "*.api_key", "token", "*.token", "auth_json", "*.auth_json", "code_plain", "*.code_plain",
          "verification_code", "*.verification_code",
          "access_token", "refresh_token", "*.access_token", "*.refresh_token", "raw_key", "account_token",
        ],
        censor: "[redacted]",
      },
    },
    destination,
  );
}
