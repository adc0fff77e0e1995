// Claude Code, unchanged, on every lane: configured only through ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY, headless (`claude -p`), it creates hello.txt through the gateway with its own
// Write tool, whatever vendor serves the lane (its defaults, such as context_management and
// `role: "system"` turns, adapted on translated lanes).
import { describe, test } from "bun:test";
import { LANES, bin, expectTaskDone, runAgent, useAgentWorld } from "./agent-world.ts";
import { TASK } from "./play-model.ts";

describe("Claude Code through the gateway", () => {
  const w = useAgentWorld();
  for (const laneId of LANES) {
    test(`Claude Code completes a file task on the ${laneId} lane`, async () => {
      const from = w.model.calls.length;
      const run = await runAgent(w, [bin("claude")!, "-p", TASK, "--model", "claude-sonnet-4-5", "--allowedTools", "Write", "--permission-mode", "acceptEdits", "--output-format", "text"], {
        ANTHROPIC_BASE_URL: w.gw.url,
        ANTHROPIC_API_KEY: w.key[laneId].raw,
        DISABLE_AUTOUPDATER: "1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      });
      await expectTaskDone(w, run, laneId, from);
    }, 120_000);
  }
});
