// What the vendor batch clients (openai-batch.ts, anthropic-batch.ts, google-batch.ts) share: the
// shape of a batch's state and of one result line, the error a vendor call ends in, and the call
// itself, whose error carries the vendor's words without the key the request carried.
import type { Json } from "../../protocols/types.ts";
import { scrubSecrets } from "../../relay/secret-scrub.ts";

export interface VendorLine {
  /** The custom id the line was sent with (the item's index as a string). */
  customId: string;
  /** `succeeded`: `body` is the vendor's answer. Otherwise the line failed, expired or was cancelled. */
  outcome: "succeeded" | "errored" | "expired" | "canceled";
  status: number;
  body: Json | null;
  error: { code: string; message: string } | null;
}

export interface VendorBatchState {
  id: string;
  status: string;
  /** True once the vendor will change nothing more (its results are final). */
  ended: boolean;
  outputFileId: string | null;
  errorFileId: string | null;
}

export class VendorBatchError extends Error {
  /**
   * A refusal that asking again will not change (a 4xx other than 429, or what the gateway itself
   * will not follow): the items run live instead. Anything else is tried again at the next tick.
   */
  readonly permanent: boolean;
  constructor(message: string, readonly status: number, permanent?: boolean) {
    super(message);
    this.permanent = permanent ?? (status >= 400 && status < 500 && status !== 429);
  }
}

/** The header values a vendor call authenticates with: what its error text must never repeat. */
const AUTH_HEADERS = ["authorization", "x-api-key", "x-goog-api-key"];

/** One call to a vendor's batch API; a non-2xx answer throws with the vendor's words (at most 500 characters, the key scrubbed out). */
export async function callVendor(vendor: string, url: string, init: RequestInit): Promise<Response> {
  const r = await fetch(url, init);
  if (r.ok) return r;
  const headers = new Headers(init.headers);
  const secrets = AUTH_HEADERS.flatMap((h) => {
    const v = headers.get(h);
    return v ? [v.replace(/^Bearer\s+/i, "")] : [];
  });
  const text = scrubSecrets((await r.text().catch(() => "")).slice(0, 500), secrets);
  throw new VendorBatchError(`${vendor} batch call ${new URL(url).pathname} answered ${r.status}: ${text}`, r.status);
}

/** The longest results line read (a line past it is garbage, left out like one that does not parse). */
const MAX_LINE_BYTES = 16 * 1024 * 1024;

/**
 * The lines of a JSONL answer that parse, as they arrive: a results file of 50,000 long answers
 * is never held whole. A line that does not parse, or is longer than MAX_LINE_BYTES, is left out
 * (its item is then never reported, and runs live).
 */
export async function* jsonlLines<T>(res: Response): AsyncGenerator<T> {
  if (!res.body) return;
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let rest = "";
  let skipping = false;
  const parse = (line: string): T | undefined => {
    if (!line.trim()) return undefined;
    try {
      return JSON.parse(line) as T;
    } catch {
      return undefined;
    }
  };
  for (;;) {
    const { done, value } = await reader.read();
    const text = done ? dec.decode() : dec.decode(value, { stream: true });
    let from = 0;
    for (let nl = text.indexOf("\n"); nl >= 0; from = nl + 1, nl = text.indexOf("\n", from)) {
      const line = rest + text.slice(from, nl);
      rest = "";
      if (skipping) skipping = false;
      else {
        const v = parse(line);
        if (v !== undefined) yield v;
      }
    }
    if (!skipping) rest += text.slice(from);
    if (rest.length > MAX_LINE_BYTES) {
      rest = "";
      skipping = true;
    }
    if (done) break;
  }
  if (!skipping) {
    const v = parse(rest);
    if (v !== undefined) yield v;
  }
}
