// The translation policy (CONTRACT §9) codec by codec: under `adapt` what a lane's protocol cannot
// carry is mapped or dropped and named; under `strict` the same request is refused as before; and
// what would change the answer's meaning stays a 400 under either.
import { describe, expect, test } from "bun:test";
import { GatewayError } from "../../src/errors.ts";
import { AdaptLog } from "../../src/protocols/adapt.ts";
import { anthropicClientCodec, anthropicCodec } from "../../src/protocols/anthropic/index.ts";
import { geminiCodec } from "../../src/protocols/gemini/index.ts";
import { responsesClientCodec } from "../../src/protocols/responses/index.ts";
import { laneToolName } from "../../src/protocols/responses/tool-map.ts";
import { catalogHints } from "../../src/providers/catalog-hints.ts";
import type { ChatRequest, Json } from "../../src/protocols/types.ts";
import { parseSse } from "./helpers.ts";

const adapt = (names?: Record<string, string>) => new AdaptLog("adapt", names);
const strict = () => new AdaptLog("strict");

function refused(fn: () => unknown, mention: RegExp, param?: string) {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(GatewayError);
    expect((e as GatewayError).status).toBe(400);
    expect((e as GatewayError).code).toBe("unsupported_feature");
    expect((e as GatewayError).message).toMatch(mention);
    if (param) expect((e as GatewayError).param).toBe(param);
    return;
  }
  throw new Error("expected a 400 unsupported_feature");
}

const encodeAnthropic = (req: Json, log?: AdaptLog) => anthropicCodec.encodeRequest(req as ChatRequest, { model: "claude-sonnet-4-5", stream: false, adapt: log });
const encodeGemini = (req: Json, log?: AdaptLog) => geminiCodec.encodeRequest(req as ChatRequest, { model: "gemini-2.5-flash", stream: false, adapt: log });
const user = [{ role: "user", content: "hi" }];

describe("CONTRACT §9: Claude Code's Messages body on non-Anthropic lanes", () => {
  const claudeCode = {
    model: "claude-sonnet-4-5",
    max_tokens: 32000,
    system: [{ type: "text", text: "You are Claude Code.", cache_control: { type: "ephemeral" } }],
    messages: [
      { role: "user", content: [{ type: "text", text: "fix the bug" }] },
      { role: "system", content: "<system-reminder>Plan mode is off.</system-reminder>" },
      { role: "user", content: "go on" },
    ],
    context_management: { edits: [{ type: "clear_thinking_20251015", keep: "all" }] },
    metadata: { user_id: "user_abc_account_x_session_y" },
  };

  test("CONTRACT §9: context_management is dropped and system turns become chat system messages in place, both named", () => {
    const log = adapt(anthropicClientCodec.fieldNames);
    const pivot = anthropicClientCodec.toPivot(claudeCode, log);
    expect(pivot.messages).toEqual([
      { role: "system", content: [{ type: "text", text: "You are Claude Code." }] },
      { role: "user", content: [{ type: "text", text: "fix the bug" }] },
      { role: "system", content: [{ type: "text", text: "<system-reminder>Plan mode is off.</system-reminder>" }] },
      { role: "user", content: "go on" },
    ]);
    expect("context_management" in pivot).toBe(false);
    expect(pivot.user).toBe("user_abc_account_x_session_y");
    expect(log.summary()).toBe("context_management=dropped, messages[].role=mapped");
  });

  test("CONTRACT §9: under strict the same body is refused as before (context_management, then the system role)", () => {
    refused(() => anthropicClientCodec.toPivot(claudeCode, strict()), /`context_management` is not supported on non-Anthropic lanes/, "context_management");
    const { context_management: _, ...rest } = claudeCode;
    expect(() => anthropicClientCodec.toPivot(rest, strict())).toThrow('messages[1].role must be "user" or "assistant"');
  });

  test("CONTRACT §9: a Gemini lane then gets the system turn as system text and metadata.user_id named as dropped", () => {
    const log = adapt(anthropicClientCodec.fieldNames);
    const pivot = anthropicClientCodec.toPivot(claudeCode, log);
    const lane = log.fork();
    const body = encodeGemini(pivot, lane);
    expect(body.systemInstruction.parts.map((p: Json) => p.text)).toEqual(["You are Claude Code.", "<system-reminder>Plan mode is off.</system-reminder>"]);
    expect(body.contents).toEqual([{ role: "user", parts: [{ text: "fix the bug" }, { text: "go on" }] }]);
    expect(lane.summary()).toBe("context_management=dropped, messages[].role=mapped, metadata.user_id=dropped");
    // The pivot's own log is not changed by a lane's encoder.
    expect(log.summary()).toBe("context_management=dropped, messages[].role=mapped");
  });

  test("CONTRACT §9: on an Anthropic lane the pass-through body gets its system turns moved into `system` (named moved), turns around them joined", () => {
    const log = adapt();
    const out = anthropicCodec.passThroughRequest!(claudeCode, { model: "claude-sonnet-4-5", stream: false, adapt: log });
    expect(out.system).toEqual([
      { type: "text", text: "You are Claude Code.", cache_control: { type: "ephemeral" } },
      { type: "text", text: "<system-reminder>Plan mode is off.</system-reminder>" },
    ]);
    expect(out.messages).toEqual([{ role: "user", content: [{ type: "text", text: "fix the bug" }, { type: "text", text: "go on" }] }]);
    expect(out.context_management).toEqual(claudeCode.context_management); // Anthropic's own feature: kept
    expect(log.summary()).toBe("messages[].role=moved");
    expect(claudeCode.messages).toHaveLength(3); // the client's body is not changed
  });

  test("CONTRACT §9: a pass-through body without system turns is the client's own object, nothing noted; strict leaves system turns alone", () => {
    const plain = { ...claudeCode, messages: [claudeCode.messages[0]] };
    const log = adapt();
    expect(anthropicCodec.passThroughRequest!(plain, { model: "claude-sonnet-4-5", stream: false, adapt: log })).toBe(plain);
    expect(log.summary()).toBeNull();
    expect(anthropicCodec.passThroughRequest!(claudeCode, { model: "claude-sonnet-4-5", stream: false, adapt: strict() })).toBe(claudeCode);
  });
});

describe("CONTRACT §9: reasoning_effort → Anthropic extended thinking", () => {
  test("CONTRACT §9: the documented table: none/minimal no thinking, low 1024, medium 4096, high 16384, xhigh 32768; max_tokens grows by the budget", () => {
    for (const [effort, budget] of [["low", 1024], ["medium", 4096], ["high", 16384], ["xhigh", 32768]] as const) {
      const log = adapt();
      const body = encodeAnthropic({ model: "m", messages: user, reasoning_effort: effort }, log);
      expect(body.thinking).toEqual({ type: "enabled", budget_tokens: budget });
      expect(body.max_tokens).toBe(4096 + budget);
      expect(log.summary()).toBe("reasoning_effort=mapped");
    }
    for (const effort of ["none", "minimal"]) {
      const log = adapt();
      const body = encodeAnthropic({ model: "m", messages: user, reasoning_effort: effort }, log);
      expect("thinking" in body).toBe(false);
      expect(body.max_tokens).toBe(4096);
      expect(log.summary()).toBe("reasoning_effort=mapped");
    }
  });

  test("CONTRACT §9: a client output limit is never exceeded: the budget stays below it (halved), and below Anthropic's minimum thinking is dropped", () => {
    let log = adapt();
    expect(encodeAnthropic({ model: "m", messages: user, reasoning_effort: "medium", max_tokens: 20000 }, log)).toMatchObject({ max_tokens: 20000, thinking: { budget_tokens: 4096 } });
    log = adapt();
    expect(encodeAnthropic({ model: "m", messages: user, reasoning_effort: "high", max_completion_tokens: 8000 }, log)).toMatchObject({ max_tokens: 8000, thinking: { budget_tokens: 4000 } });
    log = adapt();
    const small = encodeAnthropic({ model: "m", messages: user, reasoning_effort: "high", max_tokens: 1500 }, log);
    expect("thinking" in small).toBe(false);
    expect(small.max_tokens).toBe(1500);
    expect(log.summary()).toBe("reasoning_effort=dropped");
  });

  test("CONTRACT §9: the lane's model as the catalog knows it: no thinking for a model that does not think, a raised max_tokens within its output", () => {
    expect(catalogHints("anthropic", "claude-3-haiku-20240307")).toEqual({ reasons: false, maxOutputTokens: 4096 });
    expect(catalogHints("anthropic", "claude-model-nobody-listed")).toEqual({});
    let log = adapt();
    const none = anthropicCodec.encodeRequest({ model: "m", messages: user, reasoning_effort: "high" }, { model: "claude-3-haiku-20240307", stream: false, adapt: log, hints: catalogHints("anthropic", "claude-3-haiku-20240307") });
    expect("thinking" in none).toBe(false);
    expect(none.max_tokens).toBe(4096);
    expect(log.summary()).toBe("reasoning_effort=dropped");
    log = adapt();
    const fit = anthropicCodec.encodeRequest({ model: "m", messages: user, reasoning_effort: "high" }, { model: "m", stream: false, adapt: log, hints: { reasons: true, maxOutputTokens: 8192 } });
    expect(fit).toMatchObject({ max_tokens: 8192, thinking: { type: "enabled", budget_tokens: 4096 } });
    log = adapt();
    const flash = geminiCodec.encodeRequest({ model: "m", messages: user, reasoning_effort: "low" } as ChatRequest, { model: "gemini-2.0-flash", stream: false, adapt: log, hints: catalogHints("google", "gemini-2.0-flash") });
    expect(flash.generationConfig?.thinkingConfig).toBeUndefined();
    expect(log.summary()).toBe("reasoning_effort=dropped");
  });

  test("CONTRACT §9: where Anthropic refuses thinking with what else the request asks (temperature, forced tool, an unsigned tool loop) the effort is dropped, not refused", () => {
    const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: {} } } }];
    const cases: Json[] = [
      { temperature: 0.2 },
      { tools, tool_choice: "required" },
      { response_format: { type: "json_object" } },
      {
        messages: [
          { role: "user", content: "weather?" },
          { role: "assistant", content: null, tool_calls: [{ id: "toolu_1", type: "function", function: { name: "get_weather", arguments: "{}" } }] },
          { role: "tool", tool_call_id: "toolu_1", content: "18C" },
        ],
        tools,
      },
    ];
    for (const extra of cases) {
      const log = adapt();
      const body = encodeAnthropic({ model: "m", messages: user, reasoning_effort: "high", ...extra }, log);
      expect("thinking" in body).toBe(false);
      expect(log.summary()).toBe("reasoning_effort=dropped");
    }
    // A tool loop that has moved on to a new user turn may think again.
    const log = adapt();
    const body = encodeAnthropic({
      model: "m", reasoning_effort: "low", tools, messages: [
        { role: "user", content: "weather?" },
        { role: "assistant", content: null, tool_calls: [{ id: "toolu_1", type: "function", function: { name: "get_weather", arguments: "{}" } }] },
        { role: "tool", tool_call_id: "toolu_1", content: "18C" },
        { role: "assistant", content: "It is 18C." },
        { role: "user", content: "and tomorrow?" },
      ],
    }, log);
    expect(body.thinking).toEqual({ type: "enabled", budget_tokens: 1024 });
  });

  test("CONTRACT §9: Agents SDK defaults on an Anthropic lane: verbosity dropped, reasoning_effort mapped, vendor-only fields named; strict refuses", () => {
    const req = { model: "gpt-5", messages: user, reasoning_effort: "low", verbosity: "low", store: true, prompt_cache_key: "k", safety_identifier: "s", service_tier: "flex" };
    const log = adapt();
    const body = encodeAnthropic(req, log);
    expect(body.thinking).toEqual({ type: "enabled", budget_tokens: 1024 });
    for (const k of ["verbosity", "store", "prompt_cache_key", "safety_identifier", "service_tier", "reasoning_effort"]) expect(k in body).toBe(false);
    expect(log.summary()).toBe("verbosity=dropped, service_tier=dropped, store=dropped, prompt_cache_key=dropped, safety_identifier=dropped, reasoning_effort=mapped");
    refused(() => encodeAnthropic(req, strict()), /`reasoning_effort` is not supported on anthropic lanes/, "reasoning_effort");
    refused(() => encodeAnthropic({ ...req, reasoning_effort: undefined }, strict()), /`verbosity` is not supported/, "verbosity");
    refused(() => encodeAnthropic({ model: "m", messages: user, reasoning_effort: "extreme" }, adapt()), /`reasoning_effort` "extreme"/);
  });

  test("CONTRACT §9: what changes the answer's meaning stays 400 under adapt (n > 1, logprobs)", () => {
    refused(() => encodeAnthropic({ model: "m", messages: user, n: 2 }, adapt()), /`n` > 1/, "n");
    refused(() => encodeAnthropic({ model: "m", messages: user, logprobs: true }, adapt()), /`logprobs`/, "logprobs");
    refused(() => encodeGemini({ model: "m", messages: user, logprobs: true }, adapt()), /`logprobs`/, "logprobs");
  });
});

describe("CONTRACT §9: Gemini lanes", () => {
  const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
  test("CONTRACT §9: reasoning_effort → thinkingConfig.thinkingBudget (mapped), verbosity and parallel_tool_calls: false dropped", () => {
    const log = adapt();
    const body = encodeGemini({ model: "m", messages: user, reasoning_effort: "medium", verbosity: "low", parallel_tool_calls: false, tools, prompt_cache_key: "k" }, log);
    expect(body.generationConfig.thinkingConfig).toEqual({ thinkingBudget: 8192 });
    expect(body.tools[0].functionDeclarations[0].name).toBe("get_weather");
    expect(log.summary()).toBe("verbosity=dropped, prompt_cache_key=dropped, reasoning_effort=mapped, parallel_tool_calls=dropped");
    expect(encodeGemini({ model: "m", messages: user, reasoning_effort: "xhigh" }, adapt()).generationConfig.thinkingConfig).toEqual({ thinkingBudget: 32768 });
  });

  test("CONTRACT §9: under strict Gemini refuses verbosity and parallel_tool_calls: false as before", () => {
    refused(() => encodeGemini({ model: "m", messages: user, verbosity: "low" }, strict()), /`verbosity`/, "verbosity");
    refused(() => encodeGemini({ model: "m", messages: user, parallel_tool_calls: false, tools }, strict()), /`parallel_tool_calls: false`/);
  });

  test("CONTRACT §9: a Responses client's fields are named as it sent them (reasoning.effort, text.verbosity)", () => {
    const log = adapt(responsesClientCodec.fieldNames);
    const pivot = responsesClientCodec.toPivot({ model: "gpt-5", input: "hi", reasoning: { effort: "low", summary: "auto" }, text: { verbosity: "low" }, include: ["reasoning.encrypted_content"], store: false }, log);
    const lane = log.fork();
    encodeGemini(pivot, lane);
    expect(lane.summary()).toBe("include=dropped, text.verbosity=dropped, reasoning.effort=mapped");
  });
});

describe("CONTRACT §9: Codex's tools (additional_tools, namespaces, freeform custom tools) on chat lanes", () => {
  const applyPatch = { type: "custom", name: "apply_patch", description: "Edit files with a patch.", format: { type: "grammar", syntax: "lark", definition: 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF' } };
  const shell = { type: "function", name: "exec_command", description: "Run a command.", strict: false, parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] } };
  const mcp = { type: "namespace", name: "mcp__docs__", description: "Docs server", tools: [{ type: "function", name: "search", parameters: { type: "object", properties: { q: { type: "string" } } } }] };
  const codex = (input: Json[] = []) => ({
    model: "gpt-5-codex",
    input: [
      { type: "additional_tools", role: "developer", tools: [shell, applyPatch, mcp] },
      { type: "message", role: "developer", content: [{ type: "input_text", text: "You are Codex." }] },
      { type: "message", role: "user", content: [{ type: "input_text", text: "add a README" }] },
      ...input,
    ],
    tool_choice: "auto",
    parallel_tool_calls: false,
    reasoning: { effort: "medium", summary: "auto" },
    store: false,
    stream: true,
    include: ["reasoning.encrypted_content"],
    prompt_cache_key: "thread-1",
  });

  test("CONTRACT §9: the additional_tools item's tools, flattened out of their namespace, become the lane's tools; the custom tool a function with one string `input`", () => {
    const log = adapt(responsesClientCodec.fieldNames);
    const pivot = responsesClientCodec.toPivot(codex(), log);
    expect(pivot.tools!.map((t: Json) => t.function.name)).toEqual(["exec_command", "apply_patch", "mcp__docs__search"]);
    const patch = pivot.tools![1].function;
    expect(patch.description).toBe("Edit files with a patch.");
    expect(patch.parameters).toMatchObject({ type: "object", properties: { input: { type: "string" } }, required: ["input"] });
    expect(patch.parameters.properties.input.description).toContain("*** Begin Patch");
    expect(pivot.messages).toEqual([
      { role: "system", content: [{ type: "text", text: "You are Codex." }] },
      { role: "user", content: [{ type: "text", text: "add a README" }] },
    ]);
    expect(log.summary()).toBe("additional_tools=mapped, tools.custom=mapped, tools.namespace=mapped, include=dropped");
  });

  test("CONTRACT §9: Codex's history maps too: custom_tool_call → a call with {input}, its output → a tool message, a namespaced call → its lane name", () => {
    const pivot = responsesClientCodec.toPivot(codex([
      { type: "custom_tool_call", call_id: "call_1", name: "apply_patch", input: "*** Begin Patch\n*** End Patch" },
      { type: "custom_tool_call_output", call_id: "call_1", output: "Done!" },
      { type: "function_call", call_id: "call_2", namespace: "mcp__docs__", name: "search", arguments: '{"q":"readme"}' },
      { type: "function_call_output", call_id: "call_2", output: "no hits" },
    ]), adapt());
    expect(pivot.messages.slice(2)).toEqual([
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "apply_patch", arguments: JSON.stringify({ input: "*** Begin Patch\n*** End Patch" }) } }] },
      { role: "tool", tool_call_id: "call_1", content: "Done!" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_2", type: "function", function: { name: "mcp__docs__search", arguments: '{"q":"readme"}' } }] },
      { role: "tool", tool_call_id: "call_2", content: "no hits" },
    ]);
  });

  test("CONTRACT §9: under strict additional_tools is refused as before; a hosted tool stays 400 under adapt", () => {
    refused(() => responsesClientCodec.toPivot(codex(), strict()), /An input item of type "additional_tools" \(input\[0\]\) is not supported on non-Responses lanes/);
    refused(() => responsesClientCodec.toPivot({ model: "m", input: "hi", tools: [applyPatch] }, strict()), /"custom"/);
    refused(() => responsesClientCodec.toPivot({ model: "m", input: "hi", tools: [{ type: "web_search" }] }, adapt()), /The hosted tool "web_search"/);
  });

  test("CONTRACT §9: the model's call of the custom tool comes back as a custom_tool_call with `input`, a namespaced call with its namespace (not streamed)", () => {
    const completion = {
      id: "c", object: "chat.completion", created: 1, model: "claude-sonnet-4-5",
      choices: [{ index: 0, finish_reason: "tool_calls", message: { role: "assistant", content: null, tool_calls: [
        { id: "toolu_9", type: "function", function: { name: "apply_patch", arguments: JSON.stringify({ input: "*** Begin Patch\n+hi\n*** End Patch" }) } },
        { id: "toolu_10", type: "function", function: { name: "mcp__docs__search", arguments: '{"q":"x"}' } },
        { id: "toolu_11", type: "function", function: { name: "exec_command", arguments: '{"cmd":"ls"}' } },
      ] } }],
    };
    const r = responsesClientCodec.fromPivot(completion, null, codex());
    expect(r.output.map((o: Json) => ({ ...o, id: typeof o.id }))).toEqual([
      { id: "string", type: "custom_tool_call", status: "completed", call_id: "toolu_9", name: "apply_patch", input: "*** Begin Patch\n+hi\n*** End Patch" },
      { id: "string", type: "function_call", status: "completed", call_id: "toolu_10", name: "search", namespace: "mcp__docs__", arguments: '{"q":"x"}' },
      { id: "string", type: "function_call", status: "completed", call_id: "toolu_11", name: "exec_command", arguments: '{"cmd":"ls"}' },
    ]);
    expect(r.output[0].id).toMatch(/^ctc_/);
  });

  test("CONTRACT §9: streamed, the custom tool's call is a custom_tool_call item whose input arrives whole in custom_tool_call_input events", () => {
    const enc = responsesClientCodec.streamEncoder(codex());
    const base = { id: "c", object: "chat.completion.chunk", created: 1, model: "m" };
    const args = JSON.stringify({ input: "*** Begin Patch\n+hi\n*** End Patch" });
    let out = enc.push({ ...base, choices: [{ index: 0, delta: { role: "assistant", tool_calls: [{ index: 0, id: "toolu_9", type: "function", function: { name: "apply_patch", arguments: "" } }] }, finish_reason: null }] });
    out += enc.push({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: args.slice(0, 7) } }] }, finish_reason: null }] });
    out += enc.push({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: args.slice(7) } }] }, finish_reason: "tool_calls" }] });
    out += enc.end({ prompt_tokens: 10, completion_tokens: 5, cached_tokens: 0, cache_write_tokens: 0 });
    const events = parseSse(out).map((e) => JSON.parse(e.data));
    const types = events.map((e) => e.type);
    expect(types).toEqual(["response.created", "response.in_progress", "response.output_item.added", "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done", "response.output_item.done", "response.completed"]);
    expect(events[2].item).toMatchObject({ type: "custom_tool_call", status: "in_progress", call_id: "toolu_9", name: "apply_patch", input: "" });
    expect(events[3].delta).toBe("*** Begin Patch\n+hi\n*** End Patch");
    expect(events[4].input).toBe("*** Begin Patch\n+hi\n*** End Patch");
    expect(events[5].item).toMatchObject({ type: "custom_tool_call", status: "completed", call_id: "toolu_9", input: "*** Begin Patch\n+hi\n*** End Patch" });
    expect(events[6].response.output[0]).toMatchObject({ type: "custom_tool_call", input: "*** Begin Patch\n+hi\n*** End Patch" });
  });

  test("CONTRACT §9: lane tool names fit every lane (letters, digits, _ and -, at most 64), distinct names stay distinct", () => {
    expect(laneToolName("search", "mcp__docs__")).toBe("mcp__docs__search");
    expect(laneToolName("send", "collab")).toBe("collab__send");
    const odd = laneToolName("read.file", "my server");
    expect(odd).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    expect(odd).not.toBe(laneToolName("read_file", "my_server"));
    expect(laneToolName("x".repeat(80), "ns")).toHaveLength(64);
  });
});
