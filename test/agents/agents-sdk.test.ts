// The OpenAI Agents SDK, unchanged, on every lane and both of its APIs: OPENAI_BASE_URL and
// OPENAI_API_KEY point it at the gateway, and its defaults for the gpt-5 family (reasoning effort on
// Responses, `verbosity: "low"`) travel on every request; an agent with a write_file tool creates
// hello.txt whatever vendor serves the lane.
import { describe, test } from "bun:test";
import { LANES, expectTaskDone, runAgent, useAgentWorld } from "./agent-world.ts";
import { TASK } from "./play-model.ts";

const SCRIPT = new URL("./tools/agents-sdk-task.mjs", import.meta.url).pathname;

describe("OpenAI Agents SDK through the gateway", () => {
  const w = useAgentWorld();
  for (const api of ["responses", "chat_completions"] as const) {
    for (const laneId of LANES) {
      test(`an Agents SDK agent (${api}) completes a file task on the ${laneId} lane`, async () => {
        const from = w.model.calls.length;
        const run = await runAgent(w, ["node", SCRIPT, api, TASK], {
          OPENAI_BASE_URL: `${w.gw.url}/v1`,
          OPENAI_API_KEY: w.key[laneId].raw,
          OPENAI_DEFAULT_MODEL: "gpt-5-mini",
        });
        await expectTaskDone(w, run, laneId, from);
      }, 120_000);
    }
  }
});
