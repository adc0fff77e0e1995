// The README's Quick tour, run as written: its two shell blocks are read from README.md, the first
// (`npm install && npm start`, the install already done) starts a gateway process on the embedded
// defaults in a fresh directory, and the second runs verbatim in bash in that directory. Only the
// port differs (8080 may be taken on a shared machine), the OpenAI lane points at a mock upstream,
// and OPENAI_API_KEY is a test key. The embedded suite runs it (the tour is about the defaults).
import { afterAll, describe, expect, test } from "bun:test";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REAL_STORES } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";

const ROOT = join(import.meta.dir, "..", "..");
const run = REAL_STORES ? describe.skip : describe;

/** The ```sh blocks of the README's "Quick tour" section, in order. */
export function tourBlocks(readme: string): string[] {
  const start = readme.indexOf("## Quick tour");
  if (start < 0) throw new Error("README.md has no '## Quick tour' section");
  const end = readme.indexOf("\n## ", start + 5);
  const section = readme.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!.trim());
}

async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

run("README Quick tour, verbatim (embedded defaults, a gateway process)", () => {
  const dir = mkdtempSync(join(tmpdir(), "gw-tour-"));
  let gateway: ChildProcess | null = null;
  let mock: MockUpstream | null = null;
  let gatewayOut = "";
  afterAll(async () => {
    if (gateway?.pid && gateway.exitCode === null) {
      try { process.kill(-gateway.pid, "SIGKILL"); } catch {}
    }
    await mock?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  test("the tour's commands, as written, take a newcomer from nothing to a streamed answer; Ctrl-C then stops the gateway and says so", async () => {
    for (const tool of ["curl", "jq"]) {
      if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0) throw new Error(`The README tour needs ${tool}: install it (Debian: apt-get install ${tool}).`);
    }
    const [startBlock, tour] = tourBlocks(readFileSync(join(ROOT, "README.md"), "utf8"));
    if (startBlock === undefined || tour === undefined) throw new Error("the README's Quick tour needs two sh blocks: the start command, then the tour");
    expect(startBlock).toBe("npm install && npm start");
    // A fresh checkout's view: the project files, no data yet (DATA_DIR defaults to ./data).
    for (const f of ["package.json", "src", "node_modules", "tsconfig.json", "bunfig.toml"]) symlinkSync(join(ROOT, f), join(dir, f));
    mock = await startMockOpenAI();
    const port = await freePort();
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "",
      PORT: String(port), PROVIDER_OPENAI_BASE_URL: mock.url, ALLOW_PRIVATE_UPSTREAMS: "true",
    };
    // `npm install` is done (node_modules is linked): the rest of the first block, in its own process group (Ctrl-C reaches all of it).
    gateway = spawn("sh", ["-c", startBlock.replace(/^npm install && /, "")], { cwd: dir, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    gateway.stdout!.on("data", (d) => { gatewayOut += String(d); });
    gateway.stderr!.on("data", (d) => { gatewayOut += String(d); });
    let up = false;
    for (let i = 0; i < 600 && !up; i++) {
      up = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false);
      if (!up) await Bun.sleep(100);
    }
    expect(up).toBe(true);

    const script = `set -euo pipefail\n${tour.replaceAll("localhost:8080", `127.0.0.1:${port}`)}\necho\necho "SK=$SK GW=$GW"\n`;
    // Asynchronously: the mock upstream answers from this process's event loop.
    const t = Bun.spawn(["bash", "-c", script], { cwd: dir, env: { ...env, OPENAI_API_KEY: "sk-tour-test-0123456789abcdef" }, stdout: "pipe", stderr: "pipe" });
    const [out, err, status] = await Promise.all([new Response(t.stdout).text(), new Response(t.stderr).text(), t.exited]);
    if (status !== 0) throw new Error(`tour failed (exit ${status}):\n${out.slice(0, 3000)}\n${err}\n--- gateway:\n${gatewayOut.slice(-3000)}`);
    expect(out).toContain("Activated ");
    expect(out).toMatch(/SK=sk_\S+ GW=gw_\S+/);
    // The streamed answer: chat.completion.chunk events and the terminator.
    expect(out).toContain('"object":"chat.completion.chunk"');
    expect(out).toContain("data: [DONE]");
    // The upstream got the saved key (OPENAI_API_KEY) and the request.
    expect(mock.received.at(-1)!.headers.authorization).toBe("Bearer sk-tour-test-0123456789abcdef");

    // Ctrl-C: the process group gets SIGINT; the gateway drains, says it stopped, exits 0.
    const exited = new Promise<number | null>((resolve) => gateway!.once("exit", (code) => resolve(code)));
    process.kill(-gateway.pid!, "SIGINT");
    await exited;
    for (let i = 0; i < 50 && !gatewayOut.includes("gateway stopped"); i++) await Bun.sleep(100);
    expect(gatewayOut).toContain("gateway stopped");
  }, 240_000);
});
