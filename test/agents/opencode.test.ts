// opencode, unchanged, on every lane: a custom provider in its config (the documented
// `@ai-sdk/openai-compatible` provider with `options.baseURL` and `options.apiKey`) points it at the
// gateway's chat completions; headless (`opencode run`) it creates hello.txt with its own write tool,
// whatever vendor serves the lane.
import { describe, test } from "bun:test";
import { LANES, bin, expectTaskDone, runAgent, useAgentWorld } from "./agent-world.ts";
import { TASK } from "./play-model.ts";

const config = (base: string, key: string) => JSON.stringify({
  $schema: "https://opencode.ai/config.json",
  provider: {
    gateway: {
      npm: "@ai-sdk/openai-compatible",
      name: "Model gateway",
      options: { baseURL: `${base}/v1`, apiKey: key },
      models: { "gpt-5-mini": { name: "gpt-5-mini", tool_call: true } },
    },
  },
  model: "gateway/gpt-5-mini",
  permission: { edit: "allow", bash: "allow" },
  autoupdate: false,
  share: "disabled",
});

describe("opencode through the gateway", () => {
  const w = useAgentWorld();
  for (const laneId of LANES) {
    test(`opencode completes a file task on the ${laneId} lane`, async () => {
      const from = w.model.calls.length;
      const run = await runAgent(w, [bin("opencode")!, "run", TASK], {
        OPENCODE_CONFIG_CONTENT: config(w.gw.url, w.key[laneId].raw),
        OPENCODE_DISABLE_MODELS_FETCH: "1",
        OPENCODE_DISABLE_AUTOUPDATE: "1",
        OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
        OPENCODE_DISABLE_CLAUDE_CODE: "1",
      });
      await expectTaskDone(w, run, laneId, from);
    }, 120_000);
  }
});
