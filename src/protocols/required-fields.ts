// What each client protocol's request must carry before any lane is tried (SPEC, CONTRACT §6):
// the relay asks this table by shape and never branches on protocol names itself. Every other
// property rides along untouched. Errors are 400 invalid_request_error naming the parameter.
import { z } from "zod";
import { GatewayError } from "../errors.ts";
import { embeddingTexts, encodingFormat } from "./embeddings/request.ts";
import type { ClientShape, Json } from "./types.ts";

/** `param`: the parameter at fault, as OpenAI names it in its error object. */
export const invalidRequest = (message: string, param?: string) => new GatewayError(400, message, { type: "invalid_request_error", param });

export interface RequestRule {
  /** Throws a 400 naming the first required field missing or malformed (`model` is checked before). */
  check(body: Json): void;
  /** Whether the protocol can ask for a streamed answer (`stream: true`). */
  streams: boolean;
}

export const requiredFields: Record<ClientShape, RequestRule> = {
  chat: {
    streams: true,
    check(b) {
      if (!Array.isArray(b.messages)) throw invalidRequest("Missing required parameter: `messages` (an array of message objects).", "messages");
      for (let i = 0; i < b.messages.length; i++) {
        const m = b.messages[i];
        if (m === null || typeof m !== "object" || Array.isArray(m)) throw invalidRequest(`messages[${i}] must be an object with a \`role\`.`, `messages[${i}]`);
      }
    },
  },
  anthropic: {
    streams: true,
    check(b) {
      // Anthropic requires both; without them no lane could answer as the client expects.
      if (!Array.isArray(b.messages)) throw invalidRequest("messages: Field required (an array of user and assistant turns).", "messages");
      for (let i = 0; i < b.messages.length; i++) {
        const m = b.messages[i];
        if (m === null || typeof m !== "object" || Array.isArray(m)) throw invalidRequest(`messages.${i}: must be an object with \`role\` and \`content\`.`, `messages.${i}`);
      }
      if (!Number.isInteger(b.max_tokens) || b.max_tokens < 1) throw invalidRequest("max_tokens: Field required (a positive integer).", "max_tokens");
    },
  },
  embeddings: {
    streams: false,
    check(b) {
      if (b.input === undefined || b.input === null) throw invalidRequest("Missing required parameter: `input` (a string or an array of strings or token ids).", "input");
      embeddingTexts(b);
      encodingFormat(b);
    },
  },
  gemini: {
    // The model and the streaming choice come from the URL (the route sets both before this runs).
    streams: true,
    check(b) {
      if (!Array.isArray(b.contents)) throw invalidRequest("contents: required (an array of Content objects: user and model turns).", "contents");
      for (let i = 0; i < b.contents.length; i++) {
        const c = b.contents[i];
        if (c === null || typeof c !== "object" || Array.isArray(c) || !Array.isArray(c.parts)) throw invalidRequest(`contents[${i}] must be a Content object with \`parts\`.`, `contents[${i}]`);
      }
      const gc = b.generationConfig;
      if (gc !== undefined && gc !== null && (typeof gc !== "object" || Array.isArray(gc))) throw invalidRequest("generationConfig must be an object.", "generationConfig");
    },
  },
  responses: {
    streams: true,
    check(b) {
      if (b.input === undefined || b.input === null) throw invalidRequest("Missing required parameter: `input` (a string or an array of input items).", "input");
    },
  },
};

/**
 * What `requiredFields` checks, as zod schemas for the API reference (the hot path itself does not
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
export const generateContentBodyDoc = z.looseObject({
  contents: z.array(z.looseObject({ role: z.string().optional(), parts: z.array(z.looseObject({})) })).meta({ description: "Gemini Content objects: user and model turns." }),
  systemInstruction: z.looseObject({ parts: z.array(z.looseObject({})) }).optional(),
  tools: z.array(z.looseObject({})).optional().meta({ description: "Tool objects; functionDeclarations work on every lane, Google's hosted tools on google lanes only." }),
  generationConfig: z.looseObject({ maxOutputTokens: z.int().min(1).optional() }).optional(),
}).meta({ description: "A Gemini generateContent request; the model is in the path. Passed through on google lanes, translated elsewhere." });
export const geminiCountTokensBodyDoc = z.looseObject({
  contents: z.array(z.looseObject({})).optional(),
  generateContentRequest: z.looseObject({}).optional(),
}).meta({ description: "A Gemini countTokens request: `contents`, or a whole `generateContentRequest`." });
export const countTokensBodyDoc = messagesBodyDoc.omit({ max_tokens: true, stream: true })
  .meta({ description: "A Messages request without max_tokens: the tokens its system, messages and tools take." });
