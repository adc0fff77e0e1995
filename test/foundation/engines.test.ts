// The Node.js version the project promises (package.json `engines.node`, the README's Quick tour)
// is one every installed package accepts: `npm install` on that version warns about no engine
// (a devDependency needing Node 22 while the README said 20 was a broken promise).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8"));

describe("engines", () => {
  const promise: string = pkg.engines.node;
  const lowest = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(promise);

  test("package.json promises a lowest Node.js version (>=X.Y), mirrored in the lockfile and named by the README", () => {
    expect(lowest).not.toBeNull();
    expect(lock.packages[""].engines.node).toBe(promise);
    const [, major, minor = "0"] = lowest!;
    expect(readFileSync(join(root, "README.md"), "utf8")).toContain(`Node.js ${major}.${minor} or later`);
  });

  test("every locked package, devDependencies included, accepts the lowest promised Node.js version", () => {
    const [, major, minor = "0", patch = "0"] = lowest!;
    const version = `${major}.${minor}.${patch}`;
    const refused = Object.entries(lock.packages as Record<string, { version?: string; engines?: { node?: string } | string[] }>)
      .filter(([path, p]) => path !== "" && p.engines && !Array.isArray(p.engines) && p.engines.node && !Bun.semver.satisfies(version, p.engines.node))
      .map(([path, p]) => `${path.replace(/^.*node_modules\//, "")}@${p.version} needs node ${(p.engines as { node: string }).node}`);
    expect(refused).toEqual([]);
  });
});
