// The subscription sign-in as uploaded (SPEC "POST sub-session body", CONTRACT §4).
import { z } from "zod";

// The sign-in file's schema is the sub provider's (providers/sub/auth-file.ts).
export { authJsonSchema, type AuthJson } from "../../providers/sub/auth-file.ts";

export const connectBody = z.strictObject({
  // The parsed file; a string holding the file's JSON text is accepted too (read in the handler).
  auth_json: z.unknown(),
  source_path: z.string().max(1024).nullable().optional(),
  ttl_seconds: z.number().positive().max(10 * 365 * 86400).nullable().optional(),
});

export const noQuery = z.strictObject({});

/** GET: `?include=models` adds the session's live catalog (CONTRACT §4) for the dashboard's health view. */
export const getQuery = z.strictObject({ include: z.literal("models").optional() });
