// The OpenAI Agents SDK, as a fleet's own agent would use it: one Agent with a write_file tool,
// the SDK's default model settings, pointed at the gateway by OPENAI_BASE_URL and OPENAI_API_KEY.
// argv[2]: "responses" (the SDK's default API) or "chat_completions". The task comes in argv[3].
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Agent, run, setDefaultOpenAIKey, setOpenAIAPI, setTracingDisabled, tool } from "@openai/agents";
import { z } from "zod";

const [api, task] = process.argv.slice(2);
setTracingDisabled(true);
setDefaultOpenAIKey(process.env.OPENAI_API_KEY);
setOpenAIAPI(api);

const writeFile = tool({
  name: "write_file",
  description: "Write text to a file, replacing what it held.",
  parameters: z.object({ file_path: z.string(), content: z.string() }),
  async execute({ file_path, content }) {
    writeFileSync(join(process.cwd(), file_path.replace(/^.*\//, "")), content);
    return `wrote ${content.length} bytes to ${file_path}`;
  },
});

const agent = new Agent({ name: "file agent", instructions: "You are a careful coding agent.", tools: [writeFile] });
const result = await run(agent, task);
console.log(result.finalOutput);
