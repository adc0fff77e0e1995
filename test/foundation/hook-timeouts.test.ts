// bun gives lifecycle hooks 5 s whatever bunfig's test timeout says, and stopping a test gateway
// gracefully (drain, queue close, child processes) takes longer than that on a loaded 2-core
// machine: a timed-out afterAll fails a run whose tests all passed. Every hook names its timeout.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const ROOT = join(import.meta.dir, "..");

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? testFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []);
}

/** Hooks called with one argument (no timeout), as "file:line". */
export function hooksWithoutTimeout(file: string, src: string): string[] {
  const out: string[] = [];
  const re = /\b(beforeAll|afterAll|beforeEach|afterEach)\(/g;
  for (let m = re.exec(src); m; m = re.exec(src)) {
    let depth = 1;
    let quote: string | null = null;
    let args = 1;
    let j = m.index + m[0].length;
    for (; j < src.length && depth > 0; j++) {
      const c = src[j]!;
      if (quote) {
        if (c === "\\") j++;
        else if (c === quote) quote = null;
        continue;
      }
      if (c === '"' || c === "'" || c === "`") quote = c;
      else if (c === "/" && src[j + 1] === "/") j = src.indexOf("\n", j);
      else if ("([{".includes(c)) depth++;
      else if (")]}".includes(c)) depth--;
      else if (c === "," && depth === 1) args++;
    }
    if (args < 2) out.push(`${file}:${src.slice(0, m.index).split("\n").length}`);
  }
  return out;
}

describe("test hygiene", () => {
  test("the scanner finds a hook without a timeout and accepts one with it (the check can fail)", () => {
    expect(hooksWithoutTimeout("x", "afterAll(async () => { await gw.stop(); });")).toEqual(["x:1"]);
    expect(hooksWithoutTimeout("x", "afterAll(async () => { await f(a, b); }, 60_000);")).toEqual([]);
  });

  test("every lifecycle hook in test/ names its timeout (bun's hook default is 5 s)", () => {
    const missing = testFiles(ROOT).filter((f) => f !== import.meta.path).flatMap((f) => hooksWithoutTimeout(relative(ROOT, f), readFileSync(f, "utf8")));
    expect(missing).toEqual([]);
  });
});
