// The OpenAI embeddings request (POST /v1/embeddings), read once for every lane.
import { badRequest } from "../../errors.ts";
import type { Json } from "../types.ts";

/** `input` as a list of texts, or null when it is token ids (which only OpenAI-protocol lanes read). */
export function embeddingTexts(body: Json): string[] | null {
  const input = body.input;
  if (typeof input === "string") return [input];
  if (Array.isArray(input) && input.length && input.every((s) => typeof s === "string")) return input as string[];
  if (Array.isArray(input) && input.length && (input.every((n) => typeof n === "number") || input.every((a) => Array.isArray(a)))) return null;
  throw badRequest("`input` must be a string, an array of strings, an array of token ids or an array of token-id arrays (not empty).");
}

/** `encoding_format`: float (the default) or base64. */
export function encodingFormat(body: Json): "float" | "base64" {
  const f = body.encoding_format ?? "float";
  if (f !== "float" && f !== "base64") throw badRequest("`encoding_format` must be \"float\" or \"base64\".");
  return f;
}

/** A vector as OpenAI's base64 encoding sends it: little-endian float32, base64. */
export function base64Vector(values: number[]): string {
  const f = new Float32Array(values);
  return Buffer.from(f.buffer, f.byteOffset, f.byteLength).toString("base64");
}
