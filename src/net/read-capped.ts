// Reading an upstream's body with a ceiling. Upstreams include bridges and base URLs that users
// configure: an answer of gigabytes (or a small gzip that inflates to them) must not be held
// whole by a process that serves every tenant. A declared length within the cap, without a
// content coding, is read natively (the usual answer, on the hot path); anything else is read
// piece by piece and given up past the cap.

export class BodyTooLarge extends Error {
  override name = "BodyTooLarge";
  constructor(readonly maxBytes: number) {
    super(`the upstream's answer is larger than ${maxBytes >= 1048576 ? `${maxBytes / 1048576} MiB` : `${maxBytes} bytes`}`);
  }
}

/** Ceiling of a successful upstream answer (an embeddings batch of 2,048 long vectors is ~75 MB of JSON). */
export const MAX_UPSTREAM_ANSWER_BYTES = 128 * 1024 * 1024;
/** Ceiling of an upstream's error body: only its message is used. */
export const MAX_UPSTREAM_ERROR_BYTES = 1024 * 1024;
/** Ceiling of a model list or a token endpoint's answer. */
export const MAX_UPSTREAM_SMALL_BYTES = 4 * 1024 * 1024;

const utf8 = new TextDecoder();

/**
 * A body stream as text and its size in bytes, counted piece by piece: past `maxBytes` the stream
 * is cancelled (not awaited: the refusal goes out now) and `tooLarge()` is thrown. Decoded as
 * Response.text() decodes (a leading BOM dropped, invalid bytes as U+FFFD). The one counted
 * reader of the client's bodies (http/body.ts) and the upstreams'.
 */
export async function readStreamCapped(body: ReadableStream<Uint8Array>, maxBytes: number, tooLarge: () => Error): Promise<{ text: string; bytes: number }> {
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      reader.cancel().catch(() => {});
      throw tooLarge();
    }
    parts.push(value);
  }
  return { text: utf8.decode(parts.length === 1 ? parts[0]! : Buffer.concat(parts, total)), bytes: total };
}

/** The body as text, at most `maxBytes` after decompression; past it the body is cancelled and BodyTooLarge thrown. */
export async function readTextCapped(res: Response, maxBytes: number): Promise<string> {
  const declared = res.headers.get("content-length");
  if (declared !== null && !res.headers.has("content-encoding")) {
    if (Number(declared) <= maxBytes) return res.text();
    res.body?.cancel().catch(() => {});
    throw new BodyTooLarge(maxBytes);
  }
  if (!res.body) return "";
  return (await readStreamCapped(res.body, maxBytes, () => new BodyTooLarge(maxBytes))).text;
}

/** readTextCapped, then JSON.parse. */
export async function readJsonCapped(res: Response, maxBytes: number): Promise<unknown> {
  return JSON.parse(await readTextCapped(res, maxBytes));
}
