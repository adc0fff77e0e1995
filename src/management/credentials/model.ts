// Request schemas for saved provider keys (CONTRACT §6).
import { z } from "zod";
import { API_KEY_PROVIDER_IDS } from "../../providers/endpoints.ts";

export const CREDENTIAL_LABEL_MAX = 80;

export const createCredentialBody = z.strictObject({
  provider: z.enum(API_KEY_PROVIDER_IDS),
  // At least 8 characters: the last 4 are shown as the fingerprint, so a shorter key would be
  // shown almost whole. Whitespace around a pasted key is dropped.
  api_key: z.string().trim().min(8).max(8192).refine((s) => !/\s/.test(s), "`api_key` must not contain spaces or line breaks."),
  label: z.string().trim().min(1).max(CREDENTIAL_LABEL_MAX).optional(),
});
export type CreateCredentialBody = z.output<typeof createCredentialBody>;

export const noQuery = z.strictObject({});
export const idQuery = z.strictObject({ id: z.string().min(1).max(200) });
