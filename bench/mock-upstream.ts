// The benchmark's upstream: the project's mock OpenAI server (test/mocks/openai-upstream.ts), run
// standalone, with its record of received requests emptied every second so a long run does not
// grow the mock's memory (the benchmark never reads that record).
//   bun bench/mock-upstream.ts --port 0   → prints the base URL (…/v1) on its first line
import { startMockOpenAI } from "../test/mocks/openai-upstream.ts";

const i = process.argv.indexOf("--port");
const port = i > 0 ? Number(process.argv[i + 1]) : 0;
const mock = await startMockOpenAI({ port });
setInterval(() => { mock.received.length = 0; }, 1000);
console.log(mock.url);
process.on("SIGTERM", () => { void mock.stop().finally(() => process.exit(0)); });
