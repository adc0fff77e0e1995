// Models their vendors have retired (shut down: a call answers an error), which the pricing
// catalog still lists because old usage must stay priceable. GET /v1/models never offers them.
// From the vendors' deprecation pages; a model is added here once its shutdown date has passed.
const RETIRED: RegExp[] = [
  // OpenAI: GPT-3 base models and completions-era models (shut down 2024-01-04), early snapshots.
  /^(ada|babbage|curie|davinci)$/,
  /^text-(ada|babbage|curie|davinci)-\d+$/,
  /^code-(davinci|cushman)-\d+$/,
  /^gpt-3\.5-0301$/,
  /^gpt-3\.5-turbo-(0301|0613|16k-0613)$/,
  /^gpt-4-(0314|32k(-\d+)?|vision-preview)$/,
  /^gpt-4\.5-preview(-\d{4}-\d{2}-\d{2})?$/,
  /^o1-preview(-\d{4}-\d{2}-\d{2})?$/,
  // Anthropic: Claude 1, 2, Instant, and the retired Claude 3 / 3.5 Sonnet and Claude 3 Opus.
  /^claude-(v1|1|2|instant)([-.].*)?$/,
  /^claude-3-(sonnet|opus)(-.*)?$/,
  /^claude-3-5-sonnet(-.*)?$/,
  // Groq: the Llama 2/3 and Mixtral ids it shut down in favour of newer models.
  /^llama2-70b-4096$/,
  /^llama3-(8b|70b)-8192$/,
  /^mixtral-8x7b-32768$/,
];

export function isRetiredModel(id: string): boolean {
  return RETIRED.some((r) => r.test(id));
}
