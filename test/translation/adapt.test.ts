// The translation policy through the gateway (CONTRACT §9): the coding agents' default request
// bodies on translated lanes (Claude Code on openai and google lanes, Codex's tool dialect on an
// anthropic lane, the OpenAI Agents SDK's defaults on anthropic and google lanes), what the vendor
// mocks (which refuse what the vendors refuse) received, the x-gateway-adapted header on plain and
// streamed answers, the usage record and the access line; and a strict key's 400.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Json } from "../../src/protocols/types.ts";
import { until } from "../helpers/until.ts";
import { parseSse } from "../protocols/helpers.ts";
import { startWorld, usageRowsOf, type World } from "./world.ts";

let w: World;
let strictKeys: Record<string, string>;

beforeAll(async () => {
  w = await startWorld();
  strictKeys = {};
  for (const name of ["anthropic", "google", "openai"]) {
    const r = await w.gw.call("/v1/organizations/routing-keys", { method: "POST", token: w.accountToken, body: { label: `strict ${name}`, translation: "strict", providers: [w.lanes[name]] } });
    expect(r.status).toBe(200);
    expect(r.body.routing_key.translation).toBe("strict");
    strictKeys[name] = r.body.raw_key;
  }
}, 120_000);
afterAll(async () => {
  await w?.stop();
}, 60_000);

let seq = 0;
async function send(path: string, key: string, body: Json, headers: Record<string, string> = {}) {
  const requestId = `adapt-${Date.now().toString(36)}-${++seq}`;
  const res = await w.gw.req(path, { token: key, body, headers: { "x-request-id": requestId, ...headers } });
  return { res, text: await res.text(), requestId };
}

/** Claude Code's default request: system blocks, a `system` turn inside messages, context editing, its user id. */
const claudeCode = (stream: boolean) => ({
  model: "claude-sonnet-4-5-20250929",
  max_tokens: 32000,
  stream,
  system: [{ type: "text", text: "You are Claude Code, Anthropic's official CLI for Claude.", cache_control: { type: "ephemeral" } }],
  messages: [
    { role: "user", content: [{ type: "text", text: "Where is the bug?" }] },
    { role: "system", content: "<system-reminder>The user is in plan mode.</system-reminder>" },
    { role: "user", content: [{ type: "text", text: "Look in src/.", cache_control: { type: "ephemeral" } }] },
  ],
  tools: [{ name: "Read", description: "Read a file", input_schema: { type: "object", properties: { file_path: { type: "string" } }, required: ["file_path"] } }],
  metadata: { user_id: "user_0f3a_account_1b2c_session_9d8e" },
  context_management: { edits: [{ type: "clear_thinking_20251015", keep: "all" }] },
});
const CLAUDE_HEADERS = { "anthropic-version": "2023-06-01", "anthropic-beta": "context-management-2025-06-27" };

describe("CONTRACT §9: Claude Code's Messages body", () => {
  test("CONTRACT §9: on an openai lane: context_management dropped, the system turn kept in place as system text; header, usage record and access line name both", async () => {
    const before = w.openai.served.length;
    const { res, text, requestId } = await send("/v1/messages", w.keys.openai!.rawKey, claudeCode(false), CLAUDE_HEADERS);
    expect(res.status).toBe(200);
    expect(JSON.parse(text).type).toBe("message");
    const adapted = "context_management=dropped, messages[].role=mapped";
    expect(res.headers.get("x-gateway-adapted")).toBe(adapted);
    const sent = w.openai.served.slice(before).at(-1)!.body;
    expect(JSON.stringify(sent)).not.toContain("context_management");
    // The system turn stays where Claude Code put it: between the two user turns.
    expect(sent.messages.map((m: Json) => m.role)).toEqual(["system", "user", "system", "user"]);
    expect(sent.messages[0].content).toEqual([{ type: "text", text: "You are Claude Code, Anthropic's official CLI for Claude." }]);
    expect(sent.messages[2].content).toEqual([{ type: "text", text: "<system-reminder>The user is in plan mode.</system-reminder>" }]);
    expect(sent.user).toBe("user_0f3a_account_1b2c_session_9d8e");
    const rows = await usageRowsOf(w.gw, requestId);
    expect(rows.map((r) => [r.outcome, r.adapted])).toEqual([["ok", adapted]]);
    const accessLine = () => w.gw.logs.join("").split("\n").find((l) => l.includes(`"request_id":"${requestId}"`) && l.includes('"log":"access"')) ?? null;
    const line = JSON.parse(await until("the access line", async () => accessLine(), 5000));
    expect(line.adapted).toBe(adapted);
  });

  test("CONTRACT §9: on a google lane, streamed: the header comes with the stream's headers, Gemini gets both system texts", async () => {
    const before = w.gemini.served.length;
    const { res, text, requestId } = await send("/v1/messages", w.keys.google!.rawKey, claudeCode(true), CLAUDE_HEADERS);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    expect(res.headers.get("x-gateway-adapted")).toBe("context_management=dropped, messages[].role=mapped, metadata.user_id=dropped");
    expect(parseSse(text).at(-1)!.event).toBe("message_stop");
    const sent = w.gemini.served.slice(before).at(-1)!.body;
    expect(sent.systemInstruction.parts.map((p: Json) => p.text)).toEqual([
      "You are Claude Code, Anthropic's official CLI for Claude.",
      "<system-reminder>The user is in plan mode.</system-reminder>",
    ]);
    expect(sent.contents.map((c: Json) => c.role)).toEqual(["user"]);
    const rows = await usageRowsOf(w.gw, requestId);
    expect(rows[0]!.adapted).toBe("context_management=dropped, messages[].role=mapped, metadata.user_id=dropped");
  });

  test("CONTRACT §9: on an anthropic lane the body passes through with its system turn moved into `system` (moved), context_management kept", async () => {
    const before = w.anthropic.served.length;
    const { res, requestId } = await send("/v1/messages", w.keys.anthropic!.rawKey, claudeCode(false), CLAUDE_HEADERS);
    expect(res.status).toBe(200);
    expect(res.headers.get("x-gateway-adapted")).toBe("messages[].role=moved");
    const got = w.anthropic.served.slice(before).at(-1)!;
    expect(got.headers["anthropic-beta"]).toBe("context-management-2025-06-27");
    expect(got.body.system.map((b: Json) => b.text)).toEqual(["You are Claude Code, Anthropic's official CLI for Claude.", "<system-reminder>The user is in plan mode.</system-reminder>"]);
    expect(got.body.messages).toEqual([{ role: "user", content: [{ type: "text", text: "Where is the bug?" }, { type: "text", text: "Look in src/.", cache_control: { type: "ephemeral" } }] }]);
    expect(got.body.context_management).toEqual(claudeCode(false).context_management);
    expect((await usageRowsOf(w.gw, requestId))[0]!.adapted).toBe("messages[].role=moved");
  });

  test("CONTRACT §9: count_tokens of Claude Code's body on an anthropic lane: the system turn is moved for the count too, which Anthropic then accepts", async () => {
    // What count_tokens takes (Anthropic refuses max_tokens, stream and metadata there).
    const { max_tokens: _m, stream: _s, metadata: _u, ...count } = claudeCode(false);
    const before = w.anthropic.served.length;
    const { res, text } = await send("/v1/messages/count_tokens", w.keys.anthropic!.rawKey, count, CLAUDE_HEADERS);
    if (res.status !== 200) throw new Error(text);
    expect(res.headers.get("x-token-count")).toBe("exact");
    expect(JSON.parse(text).input_tokens).toBeGreaterThan(0);
    const got = w.anthropic.served.slice(before).at(-1)!;
    expect(got.path).toBe("/v1/messages/count_tokens");
    expect(got.body.messages.map((m: Json) => m.role)).toEqual(["user"]);
    expect(got.body.system).toHaveLength(2);
  });

  test("CONTRACT §9: a plain Messages body on an anthropic lane goes byte for byte, with no header and no adapted record", async () => {
    const body = { model: "claude-sonnet-4-5-20250929", max_tokens: 100, messages: [{ role: "user", content: "hi" }] };
    const before = w.anthropic.served.length;
    const { res, requestId } = await send("/v1/messages", w.keys.anthropic!.rawKey, body, CLAUDE_HEADERS);
    expect(res.status).toBe(200);
    expect(res.headers.get("x-gateway-adapted")).toBeNull();
    expect(w.anthropic.served.slice(before).at(-1)!.raw).toBe(JSON.stringify(body));
    expect((await usageRowsOf(w.gw, requestId))[0]!.adapted).toBeNull();
  });

  test("CONTRACT §9: a strict key answers Claude Code's body on an openai lane 400 unsupported_feature in Anthropic's shape", async () => {
    const { res, text } = await send("/v1/messages", strictKeys.openai!, claudeCode(false), CLAUDE_HEADERS);
    expect(res.status).toBe(400);
    const err = JSON.parse(text);
    expect(err.type).toBe("error");
    expect(err.error.message).toContain("`context_management` is not supported on non-Anthropic lanes");
    expect(res.headers.get("x-gateway-adapted")).toBeNull();
  });
});

/** Codex's Responses body: its tools in a leading additional_tools item, grouped in a namespace, and the freeform apply_patch. */
const APPLY_PATCH = {
  type: "custom", name: "apply_patch", description: "Use the `apply_patch` tool to edit files.",
  format: { type: "grammar", syntax: "lark", definition: 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\nend_patch: "*** End Patch" LF?' },
};
const codex = (stream: boolean, history: Json[] = []) => ({
  model: "gpt-5.1-codex",
  input: [
    { type: "additional_tools", role: "developer", tools: [
      { type: "namespace", name: "functions", description: "Local tools", tools: [
        { type: "function", name: "shell_command", description: "Runs a shell command", strict: false, parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"], additionalProperties: false } },
        APPLY_PATCH,
      ] },
    ] },
    { type: "message", role: "developer", content: [{ type: "input_text", text: "You are Codex, a coding agent." }] },
    { type: "message", role: "user", content: [{ type: "input_text", text: "Create README.md saying hi." }] },
    ...history,
  ],
  tool_choice: "auto",
  parallel_tool_calls: false,
  reasoning: { effort: "medium", summary: "auto" },
  store: false,
  stream,
  include: ["reasoning.encrypted_content"],
  prompt_cache_key: "019a-thread",
});
const PATCH = "*** Begin Patch\n*** Add File: README.md\n+hi\n*** End Patch\n";
const toolUseReply = (id: string) => ({
  id: "msg_codex1", type: "message", role: "assistant", model: "claude-sonnet-4-5-20250929",
  content: [{ type: "text", text: "Adding the file." }, { type: "tool_use", id, name: "functions__apply_patch", input: { input: PATCH } }],
  stop_reason: "tool_use", stop_sequence: null, usage: { input_tokens: 900, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 40 },
});
const toolUseStream = (id: string) => [
  { type: "message_start", message: { id: "msg_codex2", type: "message", role: "assistant", model: "claude-sonnet-4-5-20250929", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 900, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 } } },
  { type: "content_block_start", index: 0, content_block: { type: "tool_use", id, name: "functions__apply_patch", input: {} } },
  { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: JSON.stringify({ input: PATCH }).slice(0, 12) } },
  { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: JSON.stringify({ input: PATCH }).slice(12) } },
  { type: "content_block_stop", index: 0 },
  { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 40 } },
  { type: "message_stop" },
];

describe("CONTRACT §9: Codex's tools on an anthropic lane", () => {
  const CODEX_ADAPTED = "additional_tools=mapped, tools.namespace=mapped, tools.custom=mapped, include=dropped, prompt_cache_key=dropped, reasoning.effort=mapped";

  test("CONTRACT §9: the additional_tools item's tools become Anthropic tools; the model's apply_patch call comes back as a custom_tool_call with `input`", async () => {
    w.anthropic.enqueue({ json: toolUseReply("toolu_codex1") });
    const before = w.anthropic.served.length;
    const { res, text, requestId } = await send("/v1/responses", w.keys.anthropic!.rawKey, codex(false));
    expect(res.status).toBe(200);
    expect(res.headers.get("x-gateway-adapted")).toBe(CODEX_ADAPTED);
    const sent = w.anthropic.served.slice(before).at(-1)!.body;
    expect(sent.tools.map((t: Json) => t.name)).toEqual(["functions__shell_command", "functions__apply_patch"]);
    expect(sent.tools[1].input_schema).toMatchObject({ type: "object", properties: { input: { type: "string" } }, required: ["input"] });
    expect(sent.tools[1].input_schema.properties.input.description).toContain("*** Begin Patch");
    expect(sent.system).toEqual([{ type: "text", text: "You are Codex, a coding agent." }]);
    // reasoning.effort medium → thinking, with max_tokens raised above the budget.
    expect(sent.thinking).toEqual({ type: "enabled", budget_tokens: 4096 });
    expect(sent.max_tokens).toBe(4096 + 4096);
    expect(sent.tool_choice).toEqual({ type: "auto", disable_parallel_tool_use: true });
    const r = JSON.parse(text);
    const call = r.output.find((o: Json) => o.type === "custom_tool_call");
    expect(call).toMatchObject({ type: "custom_tool_call", status: "completed", call_id: "toolu_codex1", name: "apply_patch", namespace: "functions", input: PATCH });
    expect(r.output.some((o: Json) => o.type === "function_call")).toBe(false);
    expect((await usageRowsOf(w.gw, requestId))[0]!.adapted).toBe(CODEX_ADAPTED);
  });

  test("CONTRACT §9: streamed, the call is a custom_tool_call item whose input arrives in custom_tool_call_input events; the header is there before the first byte", async () => {
    w.anthropic.enqueue({ stream: toolUseStream("toolu_codex2") });
    const { res, text } = await send("/v1/responses", w.keys.anthropic!.rawKey, codex(true));
    expect(res.status).toBe(200);
    expect(res.headers.get("x-gateway-adapted")).toBe(CODEX_ADAPTED);
    const events = parseSse(text).map((e) => JSON.parse(e.data));
    const added = events.find((e) => e.type === "response.output_item.added" && e.item.type === "custom_tool_call");
    expect(added.item).toMatchObject({ call_id: "toolu_codex2", name: "apply_patch", namespace: "functions", input: "" });
    expect(events.filter((e) => e.type === "response.custom_tool_call_input.delta").map((e) => e.delta).join("")).toBe(PATCH);
    expect(events.find((e) => e.type === "response.custom_tool_call_input.done").input).toBe(PATCH);
    expect(events.some((e) => e.type === "response.function_call_arguments.delta")).toBe(false);
    const done = events.at(-1);
    expect(done.type).toBe("response.completed");
    expect(done.response.output.find((o: Json) => o.type === "custom_tool_call")).toMatchObject({ call_id: "toolu_codex2", input: PATCH });
  });

  test("CONTRACT §9: the round trip: Codex sends the custom_tool_call and its output back; Anthropic gets a paired tool_use / tool_result (thinking left off for the unsigned tool loop)", async () => {
    const before = w.anthropic.served.length;
    const history = [
      { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "Plan the patch." }], encrypted_content: null },
      { type: "custom_tool_call", id: "ctc_1", status: "completed", call_id: "toolu_codex1", name: "apply_patch", namespace: "functions", input: PATCH },
      { type: "custom_tool_call_output", call_id: "toolu_codex1", output: "Success. Updated the following files:\nA README.md" },
    ];
    const { res, text, requestId } = await send("/v1/responses", w.keys.anthropic!.rawKey, codex(false, history));
    expect(res.status).toBe(200);
    expect(res.headers.get("x-gateway-adapted")).toBe(CODEX_ADAPTED.replace("reasoning.effort=mapped", "reasoning.effort=dropped"));
    const sent = w.anthropic.served.slice(before).at(-1)!.body;
    expect(sent.messages.slice(1)).toEqual([
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_codex1", name: "functions__apply_patch", input: { input: PATCH } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_codex1", content: "Success. Updated the following files:\nA README.md" }] },
    ]);
    expect("thinking" in sent).toBe(false);
    expect(JSON.parse(text).output.find((o: Json) => o.type === "message").content[0].text).toContain("anthropic answer to:");
    expect((await usageRowsOf(w.gw, requestId))[0]!.outcome).toBe("ok");
  });

  test("CONTRACT §9: a strict key refuses Codex's body: 400 unsupported_feature naming additional_tools", async () => {
    const { res, text } = await send("/v1/responses", strictKeys.anthropic!, codex(false));
    expect(res.status).toBe(400);
    const err = JSON.parse(text).error;
    expect(err.code).toBe("unsupported_feature");
    expect(err.message).toContain('An input item of type "additional_tools" (input[0]) is not supported on non-Responses lanes');
  });
});

/** The OpenAI Agents SDK's defaults for a gpt-5 model: reasoning effort and low verbosity. */
const agentsSdk = (stream: boolean) => ({
  model: "gpt-5.1",
  messages: [{ role: "system", content: "You are a helpful agent." }, { role: "user", content: "Say hi." }],
  reasoning_effort: "low",
  verbosity: "low",
  stream,
  ...(stream ? { stream_options: { include_usage: true } } : {}),
});

describe("CONTRACT §9: the Agents SDK's defaults", () => {
  test("CONTRACT §9: on an anthropic lane: reasoning_effort → thinking (1024, max_tokens raised), verbosity dropped, both named", async () => {
    const before = w.anthropic.served.length;
    const { res, text, requestId } = await send("/v1/chat/completions", w.keys.anthropic!.rawKey, agentsSdk(false));
    expect(res.status).toBe(200);
    expect(res.headers.get("x-gateway-adapted")).toBe("verbosity=dropped, reasoning_effort=mapped");
    const sent = w.anthropic.served.slice(before).at(-1)!.body;
    expect(sent.thinking).toEqual({ type: "enabled", budget_tokens: 1024 });
    expect(sent.max_tokens).toBe(4096 + 1024);
    expect("verbosity" in sent).toBe(false);
    expect(JSON.parse(text).choices[0].message.content).toContain("anthropic answer to: Say hi.");
    expect((await usageRowsOf(w.gw, requestId)).length).toBe(1); // written (the queue flushed)
    const records = await w.gw.call("/v1/organizations/usage/records?limit=20", { token: w.accountToken });
    expect(records.status).toBe(200);
    const mine = records.body.records.find((r: Json) => r.request_id === requestId);
    expect(mine.adapted).toBe("verbosity=dropped, reasoning_effort=mapped");
  });

  test("CONTRACT §9: on a google lane, streamed: reasoning_effort → thinkingConfig.thinkingBudget, verbosity dropped", async () => {
    const before = w.gemini.served.length;
    const { res, text, requestId } = await send("/v1/chat/completions", w.keys.google!.rawKey, agentsSdk(true));
    expect(res.status).toBe(200);
    expect(res.headers.get("x-gateway-adapted")).toBe("verbosity=dropped, reasoning_effort=mapped");
    expect(parseSse(text).at(-1)!.data).toBe("[DONE]");
    const sent = w.gemini.served.slice(before).at(-1)!.body;
    expect(sent.generationConfig.thinkingConfig).toEqual({ thinkingBudget: 1024 });
    expect((await usageRowsOf(w.gw, requestId))[0]!.adapted).toBe("verbosity=dropped, reasoning_effort=mapped");
  });

  test("CONTRACT §9: a strict key keeps the earlier rule: 400 unsupported_feature naming the parameter, on both lanes", async () => {
    const a = await send("/v1/chat/completions", strictKeys.anthropic!, agentsSdk(false));
    expect(a.res.status).toBe(400);
    expect(JSON.parse(a.text).error).toMatchObject({ code: "unsupported_feature", param: "reasoning_effort" });
    const g = await send("/v1/chat/completions", strictKeys.google!, agentsSdk(false));
    expect(g.res.status).toBe(400);
    expect(JSON.parse(g.text).error).toMatchObject({ code: "unsupported_feature", param: "verbosity" });
  });

  test("CONTRACT §9: what changes the answer stays refused under adapt: n > 1 on an anthropic lane is 400 unsupported_feature", async () => {
    const { res, text } = await send("/v1/chat/completions", w.keys.anthropic!.rawKey, { ...agentsSdk(false), n: 2 });
    expect(res.status).toBe(400);
    expect(JSON.parse(text).error).toMatchObject({ code: "unsupported_feature", param: "n" });
  });
});

describe("CONTRACT §9: the routing key's translation setting", () => {
  test("CONTRACT §9: translation defaults to adapt, is shown on GET, changes with PATCH, and an unknown value is 400 naming it", async () => {
    const created = await w.gw.call("/v1/organizations/routing-keys", { method: "POST", token: w.accountToken, body: { label: "policy", providers: [w.lanes.google] } });
    expect(created.body.routing_key.translation).toBe("adapt");
    const id = created.body.routing_key.id;
    const patched = await w.gw.call(`/v1/organizations/routing-keys?id=${id}`, { method: "PATCH", token: w.accountToken, body: { translation: "strict" } });
    expect(patched.status).toBe(200);
    expect(patched.body.translation).toBe("strict");
    const list = await w.gw.call("/v1/organizations/routing-keys", { token: w.accountToken });
    expect(list.body.routing_keys.find((k: Json) => k.id === id).translation).toBe("strict");
    // The key's policy reaches the relay at once (the PATCH drops the cached key): now refused.
    const refused = await send("/v1/chat/completions", created.body.raw_key, agentsSdk(false));
    expect(refused.res.status).toBe(400);
    const bad = await w.gw.call(`/v1/organizations/routing-keys?id=${id}`, { method: "PATCH", token: w.accountToken, body: { translation: "loose" } });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain("translation");
  });
});
