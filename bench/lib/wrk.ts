// wrk (Debian's `wrk`), the independent closed-loop generator the bench's own figures are checked
// against: the same request, connections kept alive, pinned to the load generator's core.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const WRK = ["/usr/bin/wrk", "/usr/local/bin/wrk"].find((p) => Bun.file(p).size > 0) ?? null;

export interface WrkResult {
  requests: number;
  non2xx: number;
  socketErrors: number;
  elapsedS: number;
  p50Ms: number;
}

/** Runs wrk for `durationS` with `connections` keep-alive connections on one thread. */
export async function runWrk(prefix: string[], url: string, headers: Record<string, string>, body: string, connections: number, durationS: number): Promise<WrkResult> {
  if (!WRK) throw new Error("wrk is not installed (Debian: apt-get install wrk)");
  const dir = mkdtempSync(join(tmpdir(), "gw-wrk-"));
  try {
    writeFileSync(join(dir, "body.json"), body);
    const lua = [
      `local f = io.open(${JSON.stringify(join(dir, "body.json"))}, "rb")`,
      `wrk.method = "POST"`,
      `wrk.body = f:read("*a")`,
      `f:close()`,
      ...Object.entries(headers).map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`),
    ].join("\n");
    writeFileSync(join(dir, "post.lua"), lua);
    const started = performance.now();
    const p = Bun.spawn([...prefix, WRK, "-t1", `-c${connections}`, `-d${durationS}s`, "--latency", "-s", join(dir, "post.lua"), url], { stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    if (code !== 0) throw new Error(`wrk failed (${code}): ${err.slice(0, 300)}`);
    const num = (re: RegExp) => Number(re.exec(out)?.[1] ?? 0);
    const p50 = /50%\s+([\d.]+)(us|ms|s)/.exec(out);
    const scale = p50?.[2] === "us" ? 0.001 : p50?.[2] === "s" ? 1000 : 1;
    const errs = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
    return {
      requests: num(/(\d+) requests in/),
      non2xx: num(/Non-2xx or 3xx responses: (\d+)/),
      socketErrors: errs ? errs.slice(1).reduce((a, b) => a + Number(b), 0) : 0,
      elapsedS: (performance.now() - started) / 1000,
      p50Ms: p50 ? Number(p50[1]) * scale : NaN,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
