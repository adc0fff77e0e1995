export { chatUpstreamCodec } from "./upstream-codec.ts";
export { chatClientCodec, chatStreamError } from "./client-codec.ts";
export { chatErrorOf } from "./errors.ts";
export { chatStreamDecoder } from "./stream-decoder.ts";
