// OpenAI's own refusals of Chat Completions parameters a model family does not take, shared by
// the OpenAI mocks: the reasoning models (o-series, gpt-5…) refuse `max_tokens` ("Use
// 'max_completion_tokens' instead"), the models that do not reason (gpt-4o, gpt-4.1…) refuse
// `reasoning_effort`; both as 400 invalid_request_error, code unsupported_parameter, naming the
// parameter. Messages as OpenAI sends them.
const REASONING_FAMILY = /^(o\d|gpt-5)/;
const NON_REASONING_FAMILY = /^(gpt-4o|gpt-4\.1|gpt-3\.5)/;

export function unsupportedChatParameter(body: any, model: string): { param: string; message: string } | null {
  if (REASONING_FAMILY.test(model) && body?.max_tokens != null) {
    return { param: "max_tokens", message: "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead." };
  }
  if (NON_REASONING_FAMILY.test(model) && body?.reasoning_effort != null) {
    return { param: "reasoning_effort", message: "Unsupported parameter: 'reasoning_effort' is not supported with this model." };
  }
  return null;
}
