// The entry point's guard against a promise rejected where nobody waits (src/stray-rejections.ts):
// a real bun process, with and without the guard.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { STRAY_REJECTION } from "../../src/stray-rejections.ts";

const ROOT = join(import.meta.dir, "..", "..");
const BUN = join(ROOT, "node_modules", ".bin", "bun");

async function run(guarded: boolean) {
  const script = `
    import { createLogger } from "./src/logger.ts";
    import { logStrayRejections } from "./src/stray-rejections.ts";
    if (${guarded}) logStrayRejections(createLogger("info"));
    Promise.reject(new Error("Connection is closed."));
    setTimeout(() => console.log("still serving"), 100);
  `;
  const p = Bun.spawn([BUN, "-e", script], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const [code, out, err] = await Promise.all([p.exited, new Response(p.stdout).text(), new Response(p.stderr).text()]);
  return { code, out, err };
}

describe("stray promise rejections", () => {
  test("a rejection nobody awaits is logged at error level with where it came from, and the process keeps serving", async () => {
    const r = await run(true);
    expect(r.code).toBe(0);
    expect(r.out).toContain("still serving");
    const line = JSON.parse(r.out.split("\n").find((l) => l.includes(STRAY_REJECTION))!);
    expect(line.level).toBe(50);
    expect(line.err).toBe("Error: Connection is closed.");
    expect(line.at.length).toBeGreaterThan(0);
  }, 30_000);

  test("without the guard the same rejection ends the process (what the guard prevents)", async () => {
    const r = await run(false);
    expect(r.code).not.toBe(0);
    expect(r.out).not.toContain("still serving");
  }, 30_000);
});
