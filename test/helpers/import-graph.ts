// The import graph of src/ (dependency-cruiser, type-only imports included) and the two rules the
// architecture holds it to (docs/architecture.md "Layers"): no circle, and every import points to
// its own layer or one below.
import { cruise } from "dependency-cruiser";

export interface Edge {
  from: string;
  to: string;
  typeOnly: boolean;
}

export interface Layer {
  name: string;
  /** Path prefixes (a folder ends with "/"); a file belongs to the layer of its longest matching prefix. */
  paths: string[];
}

/** Every import between files under `root`, resolved as TypeScript resolves them. Throws on an import it cannot resolve. */
export async function importGraph(root = "src"): Promise<Edge[]> {
  const r = await cruise([root], {
    tsPreCompilationDeps: true,
    doNotFollow: { path: "node_modules" },
    exclude: { path: "node_modules" },
    tsConfig: { fileName: "tsconfig.json" },
  });
  const out = r.output as { modules: Array<{ source: string; dependencies: Array<{ module: string; resolved: string; couldNotResolve: boolean; dependencyTypes: string[] }> }> };
  const edges: Edge[] = [];
  for (const m of out.modules) {
    if (!m.source.startsWith(`${root}/`)) continue;
    for (const d of m.dependencies) {
      if (d.couldNotResolve) throw new Error(`${m.source} imports ${d.module}, which does not resolve`);
      if (!d.resolved.startsWith(`${root}/`)) continue;
      edges.push({ from: m.source, to: d.resolved, typeOnly: d.dependencyTypes.includes("type-only") });
    }
  }
  return edges;
}

/**
 * The layers of the architecture document's "## Layers" table, top first: each row is
 * `| N. name | \`path\`, \`path/\` ... | what it holds |`.
 */
export function parseLayers(markdown: string): Layer[] {
  const at = markdown.indexOf("\n## Layers");
  if (at < 0) throw new Error('the architecture document has no "## Layers" section');
  const section = markdown.slice(at + 1).split(/\n## /)[0]!;
  const layers: Layer[] = [];
  for (const line of section.split("\n")) {
    const m = /^\|\s*\d+\.\s*([^|]+?)\s*\|([^|]*)\|/.exec(line);
    if (!m) continue;
    const paths = [...m[2]!.matchAll(/`([^`]+)`/g)].map((p) => p[1]!);
    layers.push({ name: m[1]!, paths });
  }
  return layers;
}

/** Index (0 = top) of the layer holding `file`, by its longest matching path prefix; -1 when none holds it. */
export function layerOf(file: string, layers: Layer[]): number {
  let best = -1;
  let bestLen = -1;
  layers.forEach((l, i) => {
    for (const p of l.paths) {
      const hit = p.endsWith("/") ? file.startsWith(p) : file === p;
      if (hit && p.length > bestLen) {
        best = i;
        bestLen = p.length;
      }
    }
  });
  return best;
}

const show = (e: Edge) => `${e.from} → ${e.to}${e.typeOnly ? " (type-only)" : ""}`;

/** One line per import that points up a layer, naming both files and both layers. */
export function upwardImports(edges: Edge[], layers: Layer[]): string[] {
  const out: string[] = [];
  for (const e of edges) {
    const a = layerOf(e.from, layers);
    const b = layerOf(e.to, layers);
    if (a >= 0 && b >= 0 && b < a) out.push(`${show(e)}: layer "${layers[a]!.name}" imports layer "${layers[b]!.name}" above it`);
  }
  return out;
}

/** Files no layer holds. */
export function unlayered(edges: Edge[], layers: Layer[]): string[] {
  const files = new Set(edges.flatMap((e) => [e.from, e.to]));
  return [...files].filter((f) => layerOf(f, layers) < 0).sort();
}

/**
 * Every circle, one per strongly connected component (Tarjan), shown as one closed path through
 * it with the kind of each import: `a → b (type-only) → a`.
 */
export function circles(edges: Edge[]): string[] {
  const next = new Map<string, Edge[]>();
  for (const e of edges) (next.get(e.from) ?? next.set(e.from, []).get(e.from)!).push(e);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  let n = 0;
  const visit = (v: string) => {
    index.set(v, n);
    low.set(v, n++);
    stack.push(v);
    onStack.add(v);
    for (const e of next.get(v) ?? []) {
      if (!index.has(e.to)) {
        visit(e.to);
        low.set(v, Math.min(low.get(v)!, low.get(e.to)!));
      } else if (onStack.has(e.to)) low.set(v, Math.min(low.get(v)!, index.get(e.to)!));
    }
    if (low.get(v) === index.get(v)) {
      const c: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        c.push(w);
      } while (w !== v);
      if (c.length > 1 || (next.get(v) ?? []).some((e) => e.to === v)) components.push(c);
    }
  };
  for (const v of [...next.keys()].sort()) if (!index.has(v)) visit(v);
  return components.map((c) => {
    const inside = new Set(c);
    const start = [...c].sort()[0]!;
    // Shortest way back to the start, breadth first inside the component.
    const via = new Map<string, Edge>();
    const queue = [start];
    while (queue.length) {
      const v = queue.shift()!;
      const hit = (next.get(v) ?? []).find((e) => e.to === start);
      if (hit) {
        const path: Edge[] = [hit];
        for (let u = v; u !== start; u = via.get(u)!.from) path.unshift(via.get(u)!);
        return `${start} → ${path.map((e) => `${e.to}${e.typeOnly ? " (type-only)" : ""}`).join(" → ")} [${c.length} files]`;
      }
      for (const e of next.get(v) ?? []) {
        if (inside.has(e.to) && !via.has(e.to) && e.to !== start) {
          via.set(e.to, e);
          queue.push(e.to);
        }
      }
    }
    return `${c.sort().join(", ")} [${c.length} files]`;
  });
}
