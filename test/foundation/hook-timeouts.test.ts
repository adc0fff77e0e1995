// bun gives lifecycle hooks 5 s whatever bunfig's test timeout says, and stopping a test gateway
// gracefully (drain, queue close, child processes) takes longer than that on a loaded 2-core
// machine: a timed-out afterAll fails a run whose tests all passed. Every hook names its timeout.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const ROOT = join(import.meta.dir, "..");

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? (e.name === "node_modules" ? [] : testFiles(join(dir, e.name))) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []);
}

/**
 * Hooks called without a timeout, as "file:line". Read by lines, not parsed (a regex literal's
 * braces would fool a bracket count): a hook that fits on its line ends with `, <timeout>);`; one
 * that spans lines is closed by the first later line at its own indentation, `}, <timeout>);`.
 */
export function hooksWithoutTimeout(file: string, src: string): string[] {
  const out: string[] = [];
  const lines = src.split("\n");
  const timed = /,\s*[\w.]+\s*\);?\s*(\/\/.*)?$/;
  lines.forEach((line, i) => {
    const m = /^(\s*)(beforeAll|afterAll|beforeEach|afterEach)\(/.exec(line);
    if (!m) return;
    if (/\);?\s*(\/\/.*)?$/.test(line)) {
      if (!timed.test(line)) out.push(`${file}:${i + 1}`);
      return;
    }
    const indent = m[1]!;
    for (let j = i + 1; j < lines.length; j++) {
      const l = lines[j]!;
      if (l.startsWith(indent) && /^[})\]]/.test(l.slice(indent.length))) {
        if (!timed.test(l)) out.push(`${file}:${i + 1}`);
        return;
      }
    }
    out.push(`${file}:${i + 1}`);
  });
  return out;
}

describe("test hygiene", () => {
  test("the scanner finds a hook without a timeout and accepts one with it (the check can fail)", () => {
    expect(hooksWithoutTimeout("x", "afterAll(async () => { await gw.stop(); });")).toEqual(["x:1"]);
    expect(hooksWithoutTimeout("x", "afterAll(async () => { await f(a, b); }, 60_000);")).toEqual([]);
    expect(hooksWithoutTimeout("x", "  beforeAll(async () => {\n    on(/^\\{k:([^}]+)\\}/, (a, b) => {});\n  });")).toEqual(["x:1"]);
    expect(hooksWithoutTimeout("x", "  beforeAll(async () => {\n    on(/^\\{k:([^}]+)\\}/, (a, b) => {});\n  }, 30_000);")).toEqual([]);
  });

  test("every lifecycle hook in test/ names its timeout (bun's hook default is 5 s)", () => {
    const missing = testFiles(ROOT).filter((f) => f !== import.meta.path).flatMap((f) => hooksWithoutTimeout(relative(ROOT, f), readFileSync(f, "utf8")));
    expect(missing).toEqual([]);
  });
});
