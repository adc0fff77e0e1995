// The gateway's `cost` written into a pass-through stream's usage event (CONTRACT §9) without
// re-serialising the event: `,"cost":N` goes in just before the usage object's closing brace, so
// every other byte the upstream sent (its escapes, number forms, key order, the other SSE fields)
// reaches the client as it was. response.completed echoes the whole answer and the request's
// tools; written anew it came out altered (and cost a second serialisation of megabytes).
// Positions are found in one linear walk of the event's data (lib/json-scan.ts) read as latin1: a
// JSON text's structure is ASCII and UTF-8 never puts an ASCII byte inside a character, so the
// positions found are byte offsets.
import { asBuffer } from "../../lib/bytes.ts";
import { NESTS_TOO_DEEP, scanJson } from "../../lib/json-scan.ts";
import type { Json } from "../../protocols/types.ts";

const LF = 10, CR = 13, SPACE = 32;
const DATA_LINE = Buffer.from("\ndata:");
/** Deeper than any vendor's event; the upstream's events were parsed already, so only position matters. */
const MAX_DEPTH = 512;

/** USD as the JSON number the client reads: the usage records' own number (CONTRACT §9: equal to them), 0 for nothing. */
export function costNumber(usd: number): number {
  return Number.isFinite(usd) && usd > 0 ? usd : 0;
}

/** The member path from the event to its usage object (`holder`), or null. */
function pathTo(ev: Json, holder: Json): string[] | null {
  if (ev.usage === holder) return ["usage"];
  if (ev.response?.usage === holder) return ["response", "usage"];
  return null;
}

/** [start, end) of the member `name`'s value among `members` (json-scan's triples) of `text`, offset by `base`. */
function memberValue(text: string, members: number[], name: string, base: number): [number, number] | null {
  const quoted = `"${name}"`;
  for (let i = 0; i < members.length; i += 3) {
    const k = members[i]!;
    if (text.startsWith(quoted, k)) return [base + members[i + 1]!, base + members[i + 2]!];
  }
  return null;
}

/**
 * The event's bytes with `"cost": usd` added to its usage object (`holder`, a member of the parsed
 * event `ev`), or null when that cannot be done in place: an event of several data lines, a usage
 * that already names a cost (the upstream's own, replaced by re-serialising), a shape not known.
 */
export function spliceCost(bytes: Uint8Array, ev: Json, holder: Json, usd: number): Uint8Array | null {
  const path = pathTo(ev, holder);
  if (!path || "cost" in holder || "cost_details" in holder) return null;
  const buf = asBuffer(bytes);
  // The one data line: at the start, or after an `event:` (or `id:`) line.
  let from = buf.subarray(0, 5).toString("latin1") === "data:" ? 0 : buf.indexOf(DATA_LINE);
  if (from < 0) return null;
  if (from > 0) from++;
  if (buf.indexOf(DATA_LINE, from) >= 0) return null;
  from += 5;
  if (buf[from] === SPACE) from++;
  let to = buf.indexOf(LF, from);
  if (to < 0) to = buf.length;
  if (buf[to - 1] === CR) to--;
  let text = buf.toString("latin1", from, to);
  let base = 0;
  let span: [number, number] | null = null;
  for (const name of path) {
    const members = scanJson(text, MAX_DEPTH, true);
    if (members === null || members === NESTS_TOO_DEEP) return null;
    span = memberValue(text, members, name, base);
    if (!span) return null;
    text = buf.toString("latin1", from + span[0], from + span[1]);
    base = span[0];
  }
  if (!span || text.charCodeAt(text.length - 1) !== 125 /* } */) return null;
  const close = from + span[1] - 1;
  const empty = Object.keys(holder).length === 0;
  const insert = Buffer.from(`${empty ? "" : ","}"cost":${JSON.stringify(costNumber(usd))}`);
  return Buffer.concat([buf.subarray(0, close), insert, buf.subarray(close)]);
}
