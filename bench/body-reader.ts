// Micro-benchmark of the body reader's nesting scan against the JSON.parse every inference body
// already pays: `bun bench/body-reader.ts`. Prints ns per body for parse alone and scan + parse.
import { MAX_JSON_DEPTH, nestsDeeperThan } from "../src/http/body.ts";

const chat = (turns: number, words: number) => JSON.stringify({
  model: "gpt-4o-mini",
  stream: true,
  messages: Array.from({ length: turns }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `word "quoted" \\ ${"lorem ipsum ".repeat(words)}` })),
  tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { a: { type: "string" } } } } }],
});
const bodies: Array<[string, string]> = [
  ["small chat (0.3 KB)", chat(1, 5)],
  ["agent turn (8 KB)", chat(12, 50)],
  ["long context (200 KB)", chat(40, 400)],
  ["agent turn, 40 tools (30 KB)", JSON.stringify({ ...JSON.parse(chat(12, 50)), tools: Array.from({ length: 40 }, (_, i) => ({ type: "function", function: { name: `f${i}`, parameters: { type: "object", properties: { a: { type: "string" }, b: { type: "array", items: { type: "integer" } } } } } })) })],
  ["token ids (100 K ints)", JSON.stringify({ model: "m", input: Array.from({ length: 100_000 }, (_, i) => i % 50_000) })],
];

function time(fn: () => void, minMs = 300): number {
  for (let i = 0; i < 200; i++) fn();
  let n = 0;
  const t0 = Bun.nanoseconds();
  while (Bun.nanoseconds() - t0 < minMs * 1e6) {
    for (let i = 0; i < 50; i++) fn();
    n += 50;
  }
  return (Bun.nanoseconds() - t0) / n;
}

let sink = 0;
for (const [name, text] of bodies) {
  const parse = time(() => { sink += (JSON.parse(text) as object) ? 1 : 0; });
  const scan = time(() => { sink += nestsDeeperThan(text, MAX_JSON_DEPTH) ? 1 : 0; });
  console.log(`${name.padEnd(24)} parse ${(parse / 1000).toFixed(2).padStart(8)} µs   scan ${(scan / 1000).toFixed(2).padStart(8)} µs   scan/parse ${(100 * scan / parse).toFixed(1)} %`);
}
if (sink < 0) console.log(sink);
