// Reading and validating an inference body: the size cap and the nesting limit first (413 and 400,
// before any parsing: http/body.ts), one JSON.parse, then the fields SPEC requires. Missing
// `model`/`messages`/`input` answer 400 in the nested shape with type invalid_request_error and no
// code (CONTRACT §6). Every other property rides along untouched.
import { z } from "zod";
import { GatewayError } from "../errors.ts";
import { NOT_OBJECT, parseJsonText, readText } from "../http/body.ts";
import type { ClientShape, Json } from "../protocols/types.ts";
import { embeddingTexts, encodingFormat } from "../protocols/embeddings/request.ts";

/** `param`: the parameter at fault, as OpenAI names it in its error object. */
const invalid = (message: string, param?: string) => new GatewayError(400, message, { type: "invalid_request_error", param });

/**
 * What readInferenceBody checks, as zod schemas for the API reference (the hot path itself does not
 * run zod: it checks these few fields by hand and passes every other property through untouched).
 * Keep the two in step.
 */
const passThrough = { stream: z.boolean().nullable().optional().meta({ description: "Stream the answer as server-sent events." }) };
export const chatCompletionsBodyDoc = z.looseObject({
  model: z.string().min(1).meta({ description: "The model; each lane may substitute its own." }),
  messages: z.array(z.looseObject({ role: z.string() })).meta({ description: "OpenAI chat messages." }),
  ...passThrough,
}).meta({ description: "An OpenAI chat completions request. Every other OpenAI parameter is passed on." });
export const responsesBodyDoc = z.looseObject({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.looseObject({}))]).meta({ description: "A string or an array of input items." }),
  ...passThrough,
}).meta({ description: "An OpenAI Responses API request. Every other parameter is passed on." });
export const messagesBodyDoc = z.looseObject({
  model: z.string().min(1),
  messages: z.array(z.looseObject({ role: z.string() })).meta({ description: "Anthropic user and assistant turns." }),
  max_tokens: z.int().min(1),
  ...passThrough,
}).meta({ description: "An Anthropic Messages request (system, tools, thinking… are passed on or translated)." });
export const embeddingsBodyDoc = z.looseObject({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.string()), z.array(z.int()), z.array(z.array(z.int()))]).meta({ description: "A text, texts, or token ids (token ids on OpenAI-protocol lanes only)." }),
  encoding_format: z.enum(["float", "base64"]).optional(),
  dimensions: z.int().min(1).optional(),
}).meta({ description: "An OpenAI embeddings request." });
export const countTokensBodyDoc = messagesBodyDoc.omit({ max_tokens: true, stream: true })
  .meta({ description: "A Messages request without max_tokens: the tokens its system, messages and tools take." });

export interface InferenceBody {
  body: Json;
  bytes: number;
  stream: boolean;
  model: string;
}

export async function readInferenceBody(request: Request, shape: ClientShape, maxBytes: number): Promise<InferenceBody> {
  const raw = await readText(request, maxBytes);
  const body = parseJsonText(raw.text, (m) => invalid(m));
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw invalid(NOT_OBJECT);
  const b = body as Json;
  if (typeof b.model !== "string" || b.model === "") throw invalid("Missing required parameter: `model` (a string naming the model).", "model");
  if (shape === "chat") {
    if (!Array.isArray(b.messages)) throw invalid("Missing required parameter: `messages` (an array of message objects).", "messages");
    for (let i = 0; i < b.messages.length; i++) {
      const m = b.messages[i];
      if (m === null || typeof m !== "object" || Array.isArray(m)) throw invalid(`messages[${i}] must be an object with a \`role\`.`, `messages[${i}]`);
    }
  } else if (shape === "anthropic") {
    // Anthropic requires both; without them no lane could answer as the client expects.
    if (!Array.isArray(b.messages)) throw invalid("messages: Field required (an array of user and assistant turns).", "messages");
    for (let i = 0; i < b.messages.length; i++) {
      const m = b.messages[i];
      if (m === null || typeof m !== "object" || Array.isArray(m)) throw invalid(`messages.${i}: must be an object with \`role\` and \`content\`.`, `messages.${i}`);
    }
    if (!Number.isInteger(b.max_tokens) || b.max_tokens < 1) throw invalid("max_tokens: Field required (a positive integer).", "max_tokens");
  } else if (shape === "embeddings") {
    if (b.input === undefined || b.input === null) throw invalid("Missing required parameter: `input` (a string or an array of strings or token ids).", "input");
    embeddingTexts(b);
    encodingFormat(b);
    return { body: b, bytes: raw.bytes, stream: false, model: b.model };
  } else if (b.input === undefined || b.input === null) {
    throw invalid("Missing required parameter: `input` (a string or an array of input items).", "input");
  }
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== "boolean") throw invalid("`stream` must be a boolean.", "stream");
  return { body: b, bytes: raw.bytes, stream: b.stream === true, model: b.model };
}
