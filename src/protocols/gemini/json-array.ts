// streamGenerateContent without `alt=sse`: Google answers one JSON array whose elements are the
// stream's GenerateContentResponse objects, written as they come (`[{…}\r\n,\r\n{…}\r\n]`). The
// relay streams SSE for every protocol; this turns those bytes into that array, element by
// element. A `:` keep-alive comment becomes whitespace (valid between array elements), so a slow
// upstream still keeps the connection busy.
import { createSseDecoder } from "../sse.ts";

const enc = new TextEncoder();

export function sseToJsonArray(): TransformStream<Uint8Array, Uint8Array> {
  const sse = createSseDecoder();
  let opened = false;
  let elements = 0;
  const write = (events: { data: string }[], out: TransformStreamDefaultController<Uint8Array>) => {
    let s = opened ? "" : "[";
    opened = true;
    for (const ev of events) {
      if (!ev.data) continue;
      s += (elements++ ? "\r\n,\r\n" : "") + ev.data;
    }
    out.enqueue(enc.encode(s.length ? s : "\n"));
  };
  return new TransformStream({
    transform(chunk, out) {
      write(sse.push(chunk), out);
    },
    flush(out) {
      const rest = sse.end();
      if (rest.length || !opened) write(rest, out);
      out.enqueue(enc.encode("\r\n]"));
    },
  });
}
