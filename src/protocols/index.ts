// The codec tables the relay looks protocols up in. One line per protocol; the relay never names one.
import type { ClientCodec, ClientShape, UpstreamCodec, WireProtocol } from "./types.ts";
import { chatClientCodec, chatUpstreamCodec } from "./chat/index.ts";

export const upstreamCodecs: Partial<Record<WireProtocol, UpstreamCodec>> = {
  chat: chatUpstreamCodec,
};

export const clientCodecs: Partial<Record<ClientShape, ClientCodec>> = {
  chat: chatClientCodec,
};
