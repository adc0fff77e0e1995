// Embeddings (POST /v1/embeddings, OpenAI's shape) are not chat: they are served without the pivot,
// by a direct codec per protocol that can embed. A lane whose protocols have none fails over.
//   - `embeddings` (OpenAI and OpenAI-compatible vendors that embed): the body passes through and
//     the answer's bytes go back as they are; usage is read off it.
//   - `gemini-embeddings` (Gemini `batchEmbedContents`): one request per input text, the vectors
//     back as OpenAI's list (float or base64). Gemini reports no token counts for embeddings, so
//     usage is estimated at a quarter token per byte of input text (documented).
import { badRequest } from "../../errors.ts";
import { chatErrorOf } from "../chat/errors.ts";
import { geminiErrorOf } from "../gemini/errors.ts";
import { unsupported, usageFromChat } from "../pivot.ts";
import type { DirectCodec, Json } from "../types.ts";
import { base64Vector, embeddingTexts, encodingFormat } from "./request.ts";

export const openaiEmbeddingsCodec: DirectCodec = {
  encodeRequest: (body, opts) => (body.model === opts.model ? body : { ...body, model: opts.model }),
  decodeResponse: (body) => ({ body: null, usage: usageFromChat(body.usage) }),
  errorOf: chatErrorOf,
};

export const geminiEmbeddingsCodec: DirectCodec = {
  encodeRequest(body, opts) {
    const texts = embeddingTexts(body);
    if (!texts) unsupported("Gemini", "Token-id `input`", "send the input as text");
    encodingFormat(body);
    const model = `models/${opts.model.replace(/^models\//, "")}`;
    const dims = body.dimensions;
    if (dims !== undefined && dims !== null && (!Number.isInteger(dims) || dims < 1)) throw badRequest("`dimensions` must be a positive integer.");
    return {
      requests: texts!.map((text) => {
        const r: Json = { model, content: { parts: [{ text }] } };
        if (dims) r.outputDimensionality = dims;
        return r;
      }),
    };
  },
  decodeResponse(body, opts) {
    const list: Json[] = Array.isArray(body.embeddings) ? body.embeddings : [];
    const base64 = encodingFormat(opts.request) === "base64";
    const data = list.map((e, index) => {
      const values: number[] = Array.isArray(e?.values) ? e.values : [];
      return { object: "embedding", index, embedding: base64 ? base64Vector(values) : values };
    });
    const bytes = (embeddingTexts(opts.request) ?? []).reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0);
    const tokens = Math.max(1, Math.ceil(bytes / 4));
    return {
      body: { object: "list", data, model: opts.model, usage: { prompt_tokens: tokens, total_tokens: tokens } },
      usage: { prompt_tokens: tokens, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 },
    };
  },
  errorOf: geminiErrorOf,
};
