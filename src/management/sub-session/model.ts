// The subscription sign-in as uploaded (SPEC "POST sub-session body", CONTRACT §4).
import { z } from "zod";

/** The subscription CLI's sign-in file. Only the two tokens are required; the rest is kept as sent. */
export const authJsonSchema = z.looseObject({
  tokens: z.looseObject({
    access_token: z.string().min(1),
    refresh_token: z.string().min(1),
    id_token: z.string().nullable().optional(),
    account_id: z.string().nullable().optional(),
  }),
  last_refresh: z.string().nullable().optional(),
  OPENAI_API_KEY: z.string().nullable().optional(),
});
export type AuthJson = z.output<typeof authJsonSchema>;

export const connectBody = z.strictObject({
  // The parsed file; a string holding the file's JSON text is accepted too (read in the handler).
  auth_json: z.unknown(),
  source_path: z.string().max(1024).nullable().optional(),
  ttl_seconds: z.number().positive().max(10 * 365 * 86400).nullable().optional(),
});

export const noQuery = z.strictObject({});

/** GET: `?include=models` adds the session's live catalog (CONTRACT §4) for the dashboard's health view. */
export const getQuery = z.strictObject({ include: z.literal("models").optional() });
