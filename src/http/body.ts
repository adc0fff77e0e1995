// The one request-body reader of every route (inference, management, signup, billing webhook,
// transcriptions). Two limits protect the instance from what a client sends, before anything
// recursive touches the body:
//   - size: MAX_REQUEST_BYTES. A declared Content-Length over it is refused at once; a chunked body
//     is counted as it arrives and refused (413) the moment it passes the cap, while the client is
//     still sending, so an instance never holds more than the cap per request.
//   - nesting: JSON deeper than MAX_JSON_DEPTH levels is refused (400) by one linear, iterative scan
//     of the text, before JSON.parse and every recursive walk after it (translation, zod, stringify)
//     could freeze the event loop or overflow the stack.
// Each caller says how its refusal reads (the route's error shape), through `invalid`.
import { GatewayError } from "../errors.ts";
import { nestsDeeperThan, NESTS_TOO_DEEP, scanJson, type Members } from "../lib/json-scan.ts";
import { readStreamCapped } from "../net/read-capped.ts";

export { nestsDeeperThan };

/** The deepest JSON nesting accepted (objects and arrays), far beyond any real request. */
export const MAX_JSON_DEPTH = 64;

export function tooLarge(maxBytes: number): GatewayError {
  return new GatewayError(413, `The request body is larger than ${maxBytes} bytes; send a smaller request.`, { code: "request_too_large" });
}

/** Builds a route's 400 from a plain sentence (inference: no code; management: bad_request; signup: codeless). */
export type InvalidBody = (message: string) => GatewayError;

export const EMPTY_BODY = "The request body is empty; send a JSON object.";
export const NOT_JSON = "The request body is not valid JSON; send a JSON object.";
export const NOT_OBJECT = "The request body must be a JSON object.";
export const TOO_DEEP = `The request body nests JSON deeper than ${MAX_JSON_DEPTH} levels of objects and arrays; flatten it.`;

/**
 * The body as text and its size in bytes, never more than `maxBytes`. A declared length is
 * checked before a byte is read (the HTTP framing then holds the body to it); without one
 * (chunked) the stream is counted chunk by chunk and cancelled at the cap.
 */
export async function readText(request: Request, maxBytes: number): Promise<{ text: string; bytes: number }> {
  const declared = request.headers.get("content-length");
  if (declared !== null) {
    const bytes = Number(declared);
    if (!(bytes <= maxBytes)) throw tooLarge(maxBytes);
    return { text: await request.text(), bytes };
  }
  const body = request.body;
  if (!body) return { text: "", bytes: 0 };
  // What the client still sends past the cap is dropped; the 413 goes out now.
  return readStreamCapped(body, maxBytes, () => tooLarge(maxBytes));
}

/** Parses checked JSON text: nesting first (linear), then JSON.parse. */
export function parseJsonText(text: string, invalid: InvalidBody): unknown {
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) throw invalid(TOO_DEEP);
  return parse(text, invalid);
}

/** The same, and where each top-level member of the object sits in the text, from the same walk (lib/json-scan.ts). */
export function parseJsonTextWithMembers(text: string, invalid: InvalidBody): { value: unknown; members: Members | null } {
  const members = scanJson(text, MAX_JSON_DEPTH, true);
  if (members === NESTS_TOO_DEEP) throw invalid(TOO_DEEP);
  return { value: parse(text, invalid), members };
}

function parse(text: string, invalid: InvalidBody): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw invalid(text.trim() === "" ? EMPTY_BODY : NOT_JSON);
  }
}

/** A JSON object body: size-capped, depth-checked, parsed once. */
export async function readJsonObject(request: Request, maxBytes: number, invalid: InvalidBody): Promise<{ value: Record<string, unknown>; bytes: number }> {
  const raw = await readText(request, maxBytes);
  const value = parseJsonText(raw.text, invalid);
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw invalid(NOT_OBJECT);
  return { value: value as Record<string, unknown>, bytes: raw.bytes };
}

/**
 * A body that is streamed on rather than read (multipart uploads): the same cap, failing the
 * stream with the 413 as soon as it passes `maxBytes`. A declared length over the cap is refused
 * by the caller before anything is sent on (checkDeclaredLength).
 */
export function cappedStream(body: ReadableStream<Uint8Array>, maxBytes: number): ReadableStream<Uint8Array> {
  let total = 0;
  return body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      total += chunk.byteLength;
      if (total > maxBytes) controller.error(tooLarge(maxBytes));
      else controller.enqueue(chunk);
    },
  }));
}

/** 413 when the request declares a length over `maxBytes`. */
export function checkDeclaredLength(request: Request, maxBytes: number): void {
  const declared = request.headers.get("content-length");
  if (declared !== null && !(Number(declared) <= maxBytes)) throw tooLarge(maxBytes);
}
