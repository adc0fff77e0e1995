// The world every coding-agent test shares: the scripted model (play-model.ts) behind a real test
// gateway as the openai, anthropic and google vendors, one routing key per lane, and a runner that
// starts a pinned agent CLI (test/agents/tools, installed by .ci/run) headless with a fresh HOME and
// a fresh working directory, configured only through its documented base-URL and key settings.
import { afterAll, beforeAll, expect } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { addCredential, addRoutingKey, lane, usageRows } from "../helpers/relay-world.ts";
import { startPlayModel, type PlayModel } from "./play-model.ts";

export const LANES = ["openai", "anthropic", "google"] as const;
export type Lane = (typeof LANES)[number];

const TOOLS = new URL("./tools/node_modules/", import.meta.url).pathname;
/** A pinned agent's executable, or null when test/agents/tools is not installed. */
export const bin = (name: string) => (existsSync(join(TOOLS, ".bin", name)) ? join(TOOLS, ".bin", name) : null);
export const TOOLS_DIR = TOOLS;
/** Where the agent tests fail when the pinned agents are missing (never a silent pass). */
export function requireTools() {
  if (!existsSync(TOOLS)) throw new Error("The pinned coding agents are not installed: run `npm install --prefix test/agents/tools` (.ci/run does).");
}

export interface AgentWorld {
  gw: TestGateway;
  model: PlayModel;
  /** lane → a routing key with that one lane. */
  key: Record<Lane, { id: string; raw: string }>;
}

export function useAgentWorld(): AgentWorld {
  const w = {} as AgentWorld;
  beforeAll(async () => {
    requireTools();
    w.model = startPlayModel();
    w.gw = await startTestGateway({
      PROVIDER_OPENAI_BASE_URL: `${w.model.origin}/openai/v1`,
      PROVIDER_ANTHROPIC_BASE_URL: `${w.model.origin}/anthropic`,
      PROVIDER_GOOGLE_BASE_URL: `${w.model.origin}/google/v1beta`,
    });
    const acct = await createAccount(w.gw);
    w.key = {} as AgentWorld["key"];
    for (const p of LANES) {
      const cred = await addCredential(w.gw, acct.id, p, w.model.apiKey);
      w.key[p] = await addRoutingKey(w.gw, acct.id, { lanes: [lane(p, cred.id)], label: `agents-${p}` });
    }
  }, 60_000);
  afterAll(async () => {
    await w.gw?.stop();
    await w.model?.stop();
  }, 60_000);
  return w;
}

export interface AgentRun { code: number | null; stdout: string; stderr: string; dir: string; home: string; startedAt: number }

/**
 * Runs one agent command headless in a fresh working directory with a fresh HOME, and returns
 * what it printed. `env` is all the configuration it gets beyond HOME and PATH.
 */
export async function runAgent(w: AgentWorld, argv: string[], env: Record<string, string>, opts: { timeoutMs?: number; files?: Record<string, string> } = {}): Promise<AgentRun> {
  const dir = mkdtempSync(join(tmpdir(), "agent-work-"));
  const home = mkdtempSync(join(tmpdir(), "agent-home-"));
  for (const [name, text] of Object.entries(opts.files ?? {})) {
    const path = join(name.startsWith("~/") ? home : dir, name.replace(/^~\//, ""));
    await Bun.write(path, text.replaceAll("$WORKDIR", dir).replaceAll("$HOME", home));
  }
  w.model.workdir = dir;
  const startedAt = Date.now() - 1000;
  const proc = Bun.spawn(argv, {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, TERM: "dumb", NO_COLOR: "1", CI: "1", ...env },
    stdin: "ignore", stdout: "pipe", stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), opts.timeoutMs ?? 90_000);
  const [stdout, stderr] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  const code = await proc.exited;
  clearTimeout(timer);
  return { code, stdout, stderr, dir, home, startedAt };
}

/**
 * What every agent × lane pair must show: the agent ended well, hello.txt holds "hi", the lane's
 * vendor saw the tool call and then the answer, and the gateway recorded each call ok on that lane.
 */
export async function expectTaskDone(w: AgentWorld, run: AgentRun, laneId: Lane, from: number) {
  const file = join(run.dir, "hello.txt");
  const written = existsSync(file) ? readFileSync(file, "utf8").trim() : null;
  const calls = w.model.calls.slice(from);
  const report = { code: run.code, written, calls, stderr: run.stderr.slice(-3000), stdout: run.stdout.slice(-2000) };
  expect({ ...report, written }).toMatchObject({ written: "hi" });
  expect(report.code).toBe(0);
  expect(calls.some((c) => c.step === "tool_call")).toBe(true);
  expect(calls.some((c) => c.step === "answer")).toBe(true);
  const vendorPath = { openai: "/openai/", anthropic: "/anthropic/", google: "/google/" }[laneId];
  expect(calls.every((c) => c.path.startsWith(vendorPath))).toBe(true);
  const rows = await usageRows(w.gw, eq(usageRecords.routingKeyId, w.key[laneId].id));
  const mine = rows.filter((r) => r.createdAt.getTime() >= run.startedAt);
  expect(mine.length).toBeGreaterThanOrEqual(2);
  for (const r of mine) expect({ outcome: r.outcome, provider: r.provider }).toEqual({ outcome: "ok", provider: laneId });
  rmSync(run.dir, { recursive: true, force: true });
  rmSync(run.home, { recursive: true, force: true });
}
