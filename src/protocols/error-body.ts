// Whether a JSON answer is an error although its status said success (a vendor or a proxy in
// front of one that reports failures in a 200): the relay then treats the lane as failed, and the
// response cache never keeps it.

/**
 * A non-null `error` member. Every protocol's success leaves it out or null (Responses'
 * `error: null`); OpenAI's, Anthropic's (`type: "error"`) and Google's error bodies all carry one.
 */
export function isErrorBody(body: unknown): boolean {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return false;
  const e = (body as Record<string, unknown>).error;
  return e !== undefined && e !== null && e !== false;
}
