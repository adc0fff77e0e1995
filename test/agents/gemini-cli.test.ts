// Gemini CLI, unchanged, on every lane: GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL point it at the
// gateway's Gemini-native API (/v1beta); headless (`gemini -p --yolo`) it creates hello.txt with
// its own write_file tool, whatever vendor serves the lane.
import { describe, test } from "bun:test";
import { LANES, bin, expectTaskDone, runAgent, useAgentWorld } from "./agent-world.ts";
import { TASK } from "./play-model.ts";

describe("Gemini CLI through the gateway", () => {
  const w = useAgentWorld();
  for (const laneId of LANES) {
    test(`Gemini CLI completes a file task on the ${laneId} lane`, async () => {
      const from = w.model.calls.length;
      const run = await runAgent(w, [bin("gemini")!, "-p", TASK, "--yolo", "-m", "gemini-2.5-flash"], {
        GEMINI_API_KEY: w.key[laneId].raw,
        GOOGLE_GEMINI_BASE_URL: w.gw.url,
        GEMINI_CLI_TRUST_WORKSPACE: "true",
      }, { files: { "~/.gemini/settings.json": JSON.stringify({ security: { auth: { selectedType: "gemini-api-key" } }, privacy: { usageStatisticsEnabled: false } }) } });
      await expectTaskDone(w, run, laneId, from);
    }, 120_000);
  }
});
