// The body a coding agent sends on a typical turn: a system prompt, a few turns of conversation
// with a tool call and its result, and the tool definitions it offers (~5 kB of JSON). The bench's
// user-facing scenarios and the count guards send it, so the gateway parses, prices and forwards
// what real clients send rather than a one-line prompt.

const TOOLS = [
  {
    type: "function",
    function: {
      name: "read_file",
      description: "Read a file of the repository. Returns its text with line numbers; large files are cut at 2,000 lines.",
      parameters: {
        type: "object",
        properties: {
          path: { type: "string", description: "Path relative to the repository root." },
          start_line: { type: "integer", minimum: 1, description: "First line to return." },
          end_line: { type: "integer", minimum: 1, description: "Last line to return." },
        },
        required: ["path"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "run_command",
      description: "Run a shell command in the repository's working tree and return its exit code, stdout and stderr (each cut at 20 kB).",
      parameters: {
        type: "object",
        properties: {
          command: { type: "string", description: "The command line, run by /bin/sh -c." },
          timeout_seconds: { type: "integer", minimum: 1, maximum: 600 },
        },
        required: ["command"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "apply_patch",
      description: "Apply a unified diff to the working tree. Fails without changing anything when a hunk does not apply.",
      parameters: {
        type: "object",
        properties: { patch: { type: "string", description: "The unified diff." } },
        required: ["patch"],
        additionalProperties: false,
      },
    },
  },
];

const LOG = [
  "FAIL test/relay/usage.test.ts > records usage of a streamed answer",
  "  AssertionError: expected 41 to equal 42",
  "    at test/relay/usage.test.ts:88:25",
  "Tests: 1 failed, 212 passed, 213 total",
].join("\n");

export function agentMessages(): unknown[] {
  return [
    { role: "system", content: "You are a careful coding agent working in a TypeScript repository. Read before you change anything, keep patches small, run the tests you touch, and explain each change in one sentence. Never invent file contents: read them with the tools." },
    { role: "user", content: "The usage test fails on CI since yesterday's merge. Find out why and fix it without weakening the test." },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_1", type: "function", function: { name: "run_command", arguments: JSON.stringify({ command: "npx bun test test/relay/usage.test.ts", timeout_seconds: 120 }) } }],
    },
    { role: "tool", tool_call_id: "call_1", content: JSON.stringify({ exit_code: 1, stdout: LOG, stderr: "" }) },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_2", type: "function", function: { name: "read_file", arguments: JSON.stringify({ path: "test/relay/usage.test.ts", start_line: 60, end_line: 100 }) } }],
    },
    {
      role: "tool",
      tool_call_id: "call_2",
      content: Array.from({ length: 24 }, (_, i) => `${60 + i}\t  const record = await waitForUsage(gw, requestId, { attempt: ${i % 3} }); // line ${60 + i}`).join("\n"),
    },
    { role: "user", content: "Also check whether the streamed path counts the final usage chunk twice." },
  ];
}

export const AGENT_TOOLS = TOOLS;

/** The chat body: the agent's messages and tools, plus the bench mock's behaviour (`mock`). */
export function agentChatBody(mock: Record<string, unknown>, stream: boolean, model = "gpt-4o-mini"): string {
  return JSON.stringify({
    model,
    messages: agentMessages(),
    tools: TOOLS,
    tool_choice: "auto",
    max_tokens: 1024,
    temperature: 0.2,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    mock,
  });
}
