// Summarises a .cpuprofile (from `npm run bench -- --profile`, i.e. `bun --cpu-prof`) by sample
// counts, not by the time between samples (which counts idle gaps as the last function's time):
// self samples per function, per package or source file, and inclusive samples per src/ function.
//   bun bench/profile-summary.ts bench/results/tmp-profile/<file>.cpuprofile [top]
import { readFileSync } from "node:fs";

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

const file = process.argv[2];
if (!file) {
  console.error("usage: bun bench/profile-summary.ts <file.cpuprofile> [top]");
  process.exit(2);
}
const top = Number(process.argv[3] ?? 30);
const prof = JSON.parse(readFileSync(file, "utf8")) as { nodes: Node[]; samples: number[] };
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const hits = new Map<number, number>();
for (const s of prof.samples) hits.set(s, (hits.get(s) ?? 0) + 1);
const total = prof.samples.length;

const where = (n: Node) => {
  const u = n.callFrame.url.replace(/^.*\/work\/[^/]+\//, "").replace(process.cwd() + "/", "");
  return u ? `${u}:${n.callFrame.lineNumber + 1}` : "[native]";
};
const group = (n: Node) => {
  const u = n.callFrame.url;
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(u);
  if (m) return m[1]!;
  if (!u) return n.callFrame.functionName.startsWith("(") ? n.callFrame.functionName : "[native] " + n.callFrame.functionName;
  const s = /\/(src\/.*)$/.exec(u);
  return s ? s[1]! : u.startsWith("node:") || u.startsWith("internal:") ? "[bun runtime js]" : u;
};

const selfFn = new Map<string, number>();
const selfGroup = new Map<string, number>();
const inclSrc = new Map<string, number>();
for (const [id, count] of hits) {
  const n = byId.get(id)!;
  const k = `${n.callFrame.functionName || "(anonymous)"}  ${where(n)}`;
  selfFn.set(k, (selfFn.get(k) ?? 0) + count);
  const g = group(n);
  selfGroup.set(g, (selfGroup.get(g) ?? 0) + count);
  // Inclusive per src/ function: each distinct src frame on the stack gets the sample once.
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const f = byId.get(cur)!;
    if (!/\/src\//.test(f.callFrame.url) || f.callFrame.url.includes("node_modules")) continue;
    const key = `${f.callFrame.functionName || "(anonymous)"}  ${where(f).replace(/:\d+$/, "")}`;
    if (seen.has(key)) continue;
    seen.add(key);
    inclSrc.set(key, (inclSrc.get(key) ?? 0) + count);
  }
}

const print = (title: string, m: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${((100 * v) / total).toFixed(1).padStart(5)}%  ${String(v).padStart(6)}  ${k}`);
};
console.log(`${total} samples`);
print("self, by package / source file", selfGroup);
print("self, by function", selfFn);
print("inclusive, by src/ function", inclSrc);
