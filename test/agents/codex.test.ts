// Codex, unchanged, on every lane: a model provider in ~/.codex/config.toml (base_url, env_key,
// wire_api = "responses") is its documented way to a gateway; headless (`codex exec`) it creates
// hello.txt through its own shell tool, whatever vendor serves the lane (its tools, namespaces and
// Responses-only fields adapted on translated lanes).
import { describe, test } from "bun:test";
import { LANES, bin, expectTaskDone, runAgent, useAgentWorld } from "./agent-world.ts";
import { TASK } from "./play-model.ts";

// Codex offers OpenAI's hosted web_search tool by default; a lane whose vendor lacks it refuses it
// (CONTRACT §9: a hosted tool the lane lacks is a 400 even under adapt), so a key with such lanes
// turns it off with Codex's own documented setting.
const config = (base: string, laneId: string) => `model = "gpt-5.1"
model_provider = "gateway"
${laneId === "openai" ? "" : 'web_search = "disabled"\n'}
[model_providers.gateway]
name = "gateway"
base_url = "${base}/v1"
env_key = "GATEWAY_KEY"
wire_api = "responses"
`;

describe("Codex through the gateway", () => {
  const w = useAgentWorld();
  for (const laneId of LANES) {
    test(`Codex completes a file task on the ${laneId} lane`, async () => {
      const from = w.model.calls.length;
      const run = await runAgent(w, [bin("codex")!, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", TASK], {
        GATEWAY_KEY: w.key[laneId].raw,
      }, { files: { "~/.codex/config.toml": config(w.gw.url, laneId) } });
      await expectTaskDone(w, run, laneId, from);
    }, 120_000);
  }
});
