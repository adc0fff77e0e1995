// The codec tables the relay looks protocols up in. One line per protocol; the relay never names one.
import type { ClientCodec, ClientShape, DirectCodec, UpstreamCodec, WireProtocol } from "./types.ts";
import { geminiEmbeddingsCodec, openaiEmbeddingsCodec } from "./embeddings/index.ts";
import { chatClientCodec, chatUpstreamCodec } from "./chat/index.ts";
import { anthropicClientCodec, anthropicCodec } from "./anthropic/index.ts";
import { geminiClientCodec, geminiCodec } from "./gemini/index.ts";
import { responsesClientCodec, responsesUpstreamCodec } from "./responses/index.ts";

export const upstreamCodecs: Partial<Record<WireProtocol, UpstreamCodec>> = {
  chat: chatUpstreamCodec,
  responses: responsesUpstreamCodec,
  anthropic: anthropicCodec,
  gemini: geminiCodec,
};

export const clientCodecs: Partial<Record<ClientShape, ClientCodec>> = {
  chat: chatClientCodec,
  responses: responsesClientCodec,
  anthropic: anthropicClientCodec,
  gemini: geminiClientCodec,
};

/** Client shapes served without the pivot, by the protocols that can serve them (a lane with none fails over). */
export const directCodecs: Partial<Record<ClientShape, Partial<Record<WireProtocol, DirectCodec>>>> = {
  embeddings: { embeddings: openaiEmbeddingsCodec, "gemini-embeddings": geminiEmbeddingsCodec },
};
