// The API-key vendors' ids and public base URLs: the one place they are written down. Pure data
// with no imports, so config.ts can validate the PROVIDER_<ID>_BASE_URL overrides derived from it
// without loading any adapter.

/** Vendors' public base URLs by provider id; PROVIDER_<ID>_BASE_URL overrides each. */
export const DEFAULT_PROVIDER_BASE_URLS = {
  openai: "https://api.openai.com/v1",
  anthropic: "https://api.anthropic.com",
  google: "https://generativelanguage.googleapis.com/v1beta",
  mistral: "https://api.mistral.ai/v1",
  groq: "https://api.groq.com/openai/v1",
  xai: "https://api.x.ai/v1",
  deepseek: "https://api.deepseek.com/v1",
  together: "https://api.together.xyz/v1",
  fireworks: "https://api.fireworks.ai/inference/v1",
  openrouter: "https://openrouter.ai/api/v1",
  cerebras: "https://api.cerebras.ai/v1",
  perplexity: "https://api.perplexity.ai",
  cohere: "https://api.cohere.ai/compatibility/v1",
} as const;

export type ApiKeyProviderId = keyof typeof DEFAULT_PROVIDER_BASE_URLS;

/** The providers a saved API key can be for, in the order above. */
export const API_KEY_PROVIDER_IDS = Object.keys(DEFAULT_PROVIDER_BASE_URLS) as [ApiKeyProviderId, ...ApiKeyProviderId[]];

/** The environment variable that overrides a provider's base URL. */
export const baseUrlEnvName = (id: ApiKeyProviderId) => `PROVIDER_${id.toUpperCase()}_BASE_URL`;

/** The subscription backend and its sign-in server (SUB_API_BASE_URL, SUB_AUTH_BASE_URL override them). */
export const DEFAULT_SUB_API_BASE_URL = "https://chatgpt.com/backend-api/codex";
export const DEFAULT_SUB_AUTH_BASE_URL = "https://auth.openai.com";

/**
 * What vendors' secrets look like, for scrubbing upstream text before a client sees it: key
 * prefixes followed by `-` or `_` (OpenAI and Anthropic `sk-`, Groq `gsk_`, Cerebras `csk-`, xAI
 * `xai-`, Stripe-style `rk_`/`pk_`, the gateway's own `gw_`, session tokens), and Google's `AIza…`.
 */
export const VENDOR_SECRET_PATTERNS: readonly RegExp[] = [
  /\b(?:sk|rk|gw|pk|gsk|csk|xai|sess|key)[-_][A-Za-z0-9*._-]{6,}/gi,
  /\bAIza[0-9A-Za-z_-]{10,}/g,
];

