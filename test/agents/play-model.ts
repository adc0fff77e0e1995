// A scripted model behind the gateway for the coding-agent tests: one loopback server speaking the
// three vendor protocols the lanes use (OpenAI chat completions and Responses under /openai/v1,
// Anthropic Messages under /anthropic, Gemini generateContent under /google/v1beta), each streamed
// or not, as the vendors' API references document them.
//
// It plays the model of a two-step task: while the conversation holds no tool result, it calls the
// agent's own file-writing (or shell) tool to create hello.txt containing "hi"; once a tool result is
// there, it answers in text. Requests without tools (titles, quota probes, next-speaker checks) get a
// short text answer, or a JSON one where the request asks for JSON. It never looks at the gateway's
// own fields: it sees only what a vendor would.
import { serveLoopback, type LoopbackServer } from "../mocks/scaffold.ts";

export const TASK = "Create a file named hello.txt in the current directory containing exactly the word hi. Then say done.";
export const ANSWER = "Done: hello.txt now contains hi.";

/** A tool the agent offered, as read from any of the three protocols. */
interface OfferedTool { name: string; schema: any; namespace?: string }

/** One request the model served: which protocol path and what the step was. */
export interface PlayedCall { path: string; step: "tool_call" | "answer" | "side"; tool?: string; stream: boolean }

export interface PlayModel extends LoopbackServer {
  /** The directory the agent works in: tool calls write `${workdir}/hello.txt`. */
  workdir: string;
  calls: PlayedCall[];
  /** Bodies of the requests, newest last (for a failing test's message). */
  bodies: unknown[];
  apiKey: string;
}

/** The tools the request offers, whatever the protocol (chat, Responses, Anthropic, Gemini). */
function offeredTools(body: any): OfferedTool[] {
  const out: OfferedTool[] = [];
  const walk = (list: unknown, namespace?: string) => {
    if (!Array.isArray(list)) return;
    for (const t of list as any[]) {
      if (!t || typeof t !== "object") continue;
      if (Array.isArray(t.functionDeclarations)) for (const f of t.functionDeclarations) out.push({ name: f.name, schema: f.parametersJsonSchema ?? f.parameters ?? {} });
      else if (t.type === "namespace" && Array.isArray(t.tools)) walk(t.tools, t.name);
      else if (t.type === "function" && t.function) out.push({ name: t.function.name, schema: t.function.parameters ?? {} });
      else if (typeof t.name === "string") out.push({ name: t.name, schema: t.parameters ?? t.input_schema ?? {}, ...(namespace ? { namespace } : {}) });
    }
  };
  walk(body.tools);
  if (Array.isArray(body.input)) for (const item of body.input) if (item?.type === "additional_tools") walk(item.tools);
  return out;
}

/** Whether the conversation already holds the result of a tool call (any protocol). */
function hasToolResult(body: any): boolean {
  if (Array.isArray(body.messages)) {
    for (const m of body.messages) {
      if (m.role === "tool") return true;
      if (Array.isArray(m.content) && m.content.some((b: any) => b?.type === "tool_result")) return true;
    }
  }
  if (Array.isArray(body.input) && body.input.some((i: any) => typeof i?.type === "string" && i.type.endsWith("_call_output"))) return true;
  if (Array.isArray(body.contents) && body.contents.some((c: any) => Array.isArray(c.parts) && c.parts.some((p: any) => p.functionResponse))) return true;
  return false;
}

/** Whether a tool-less request asks for a JSON answer (Gemini CLI's next-speaker check, JSON modes). */
function wantsJson(body: any): boolean {
  const g = body.generationConfig ?? {};
  return g.responseMimeType === "application/json" || Boolean(g.responseJsonSchema ?? g.responseSchema) ||
    body.response_format?.type === "json_schema" || body.response_format?.type === "json_object" || body.text?.format?.type === "json_schema";
}

/** The tool call that writes hello.txt with the tool the agent offered, or null when it offers none fit. */
function writeCall(tools: OfferedTool[], workdir: string): { tool: OfferedTool; args: Record<string, unknown> } | null {
  const file = `${workdir}/hello.txt`;
  const props = (t: OfferedTool) => (t.schema?.properties ?? {}) as Record<string, any>;
  const byName = (n: string) => tools.find((t) => t.name === n);
  for (const name of ["Write", "write_file", "write"]) {
    const t = byName(name);
    if (!t) continue;
    const p = props(t);
    const pathKey = ["file_path", "filePath", "path", "absolute_path"].find((k) => k in p) ?? "file_path";
    return { tool: t, args: { [pathKey]: file, content: "hi" } };
  }
  for (const name of ["exec_command", "shell_command", "shell", "bash", "run_shell_command"]) {
    const t = byName(name);
    if (!t) continue;
    const p = props(t);
    const cmd = `printf hi > ${file}`;
    if ("cmd" in p) return { tool: t, args: { cmd, workdir } };
    if (p.command?.type === "array") return { tool: t, args: { command: ["bash", "-lc", cmd], workdir } };
    return { tool: t, args: { command: cmd } };
  }
  return null;
}

const SSE = { "content-type": "text/event-stream", "cache-control": "no-cache" };
const sse = (events: Array<[string | null, unknown]>) =>
  new Response(events.map(([e, d]) => `${e ? `event: ${e}\n` : ""}data: ${typeof d === "string" ? d : JSON.stringify(d)}\n\n`).join(""), { headers: SSE });
const json = (o: unknown, status = 200) => new Response(JSON.stringify(o), { status, headers: { "content-type": "application/json" } });

const USAGE = { input: 120, output: 16 };
let seq = 0;
const id = (p: string) => `${p}_${Date.now().toString(36)}${(seq++).toString(36)}`;

type Turn = { kind: "tool"; name: string; args: Record<string, unknown>; namespace?: string } | { kind: "text"; text: string };

function chatAnswer(body: any, turn: Turn): Response {
  const cid = id("chatcmpl"), model = body.model, created = Math.floor(Date.now() / 1000);
  const usage = { prompt_tokens: USAGE.input, completion_tokens: USAGE.output, total_tokens: USAGE.input + USAGE.output };
  const callId = id("call");
  const message = turn.kind === "tool"
    ? { role: "assistant", content: null, tool_calls: [{ id: callId, type: "function", function: { name: turn.name, arguments: JSON.stringify(turn.args) } }] }
    : { role: "assistant", content: turn.text };
  const finish = turn.kind === "tool" ? "tool_calls" : "stop";
  if (!body.stream) return json({ id: cid, object: "chat.completion", created, model, choices: [{ index: 0, message, finish_reason: finish }], usage });
  const chunk = (delta: unknown, finish_reason: string | null = null) => ({ id: cid, object: "chat.completion.chunk", created, model, choices: [{ index: 0, delta, finish_reason }] });
  const events: Array<[null, unknown]> = [[null, chunk({ role: "assistant", content: turn.kind === "text" ? "" : null })]];
  if (turn.kind === "tool") {
    events.push([null, chunk({ tool_calls: [{ index: 0, id: callId, type: "function", function: { name: turn.name, arguments: "" } }] })]);
    events.push([null, chunk({ tool_calls: [{ index: 0, function: { arguments: JSON.stringify(turn.args) } }] })]);
  } else {
    events.push([null, chunk({ content: turn.text })]);
  }
  events.push([null, chunk({}, finish)]);
  if (body.stream_options?.include_usage) events.push([null, { id: cid, object: "chat.completion.chunk", created, model, choices: [], usage }]);
  events.push([null, "[DONE]"]);
  return sse(events);
}

function responsesAnswer(body: any, turn: Turn): Response {
  const rid = id("resp"), created_at = Math.floor(Date.now() / 1000);
  const usage = { input_tokens: USAGE.input, input_tokens_details: { cached_tokens: 0 }, output_tokens: USAGE.output, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: USAGE.input + USAGE.output };
  const item: any = turn.kind === "tool"
    ? { type: "function_call", id: id("fc"), call_id: id("call"), name: turn.name, arguments: JSON.stringify(turn.args), status: "completed", ...(turn.namespace ? { namespace: turn.namespace } : {}) }
    : { type: "message", id: id("msg"), role: "assistant", status: "completed", content: [{ type: "output_text", text: turn.text, annotations: [] }] };
  const base = { id: rid, object: "response", created_at, model: body.model, error: null, incomplete_details: null, instructions: body.instructions ?? null, tools: body.tools ?? [], parallel_tool_calls: true, tool_choice: body.tool_choice ?? "auto", store: body.store ?? true, metadata: {} };
  const done = { ...base, status: "completed", output: [item], usage };
  if (!body.stream) return json(done);
  let n = 0;
  const ev = (type: string, rest: Record<string, unknown>): [string, unknown] => [type, { type, sequence_number: n++, ...rest }];
  const events: Array<[string, unknown]> = [ev("response.created", { response: { ...base, status: "in_progress", output: [], usage: null } }), ev("response.in_progress", { response: { ...base, status: "in_progress", output: [], usage: null } })];
  if (item.type === "function_call") {
    events.push(ev("response.output_item.added", { output_index: 0, item: { ...item, arguments: "", status: "in_progress" } }));
    events.push(ev("response.function_call_arguments.delta", { output_index: 0, item_id: item.id, delta: item.arguments }));
    events.push(ev("response.function_call_arguments.done", { output_index: 0, item_id: item.id, arguments: item.arguments }));
  } else {
    const text = (item as any).content[0].text;
    events.push(ev("response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress", content: [] } }));
    events.push(ev("response.content_part.added", { output_index: 0, item_id: item.id, content_index: 0, part: { type: "output_text", text: "", annotations: [] } }));
    events.push(ev("response.output_text.delta", { output_index: 0, item_id: item.id, content_index: 0, delta: text }));
    events.push(ev("response.output_text.done", { output_index: 0, item_id: item.id, content_index: 0, text }));
    events.push(ev("response.content_part.done", { output_index: 0, item_id: item.id, content_index: 0, part: { type: "output_text", text, annotations: [] } }));
  }
  events.push(ev("response.output_item.done", { output_index: 0, item }));
  events.push(ev("response.completed", { response: done }));
  return sse(events);
}

function anthropicAnswer(body: any, turn: Turn): Response {
  const mid = id("msg");
  const block = turn.kind === "tool" ? { type: "tool_use", id: id("toolu"), name: turn.name, input: turn.args } : { type: "text", text: turn.text };
  const stop = turn.kind === "tool" ? "tool_use" : "end_turn";
  const usage = { input_tokens: USAGE.input, output_tokens: USAGE.output, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  if (!body.stream) return json({ id: mid, type: "message", role: "assistant", model: body.model, content: [block], stop_reason: stop, stop_sequence: null, usage });
  const events: Array<[string, unknown]> = [
    ["message_start", { type: "message_start", message: { id: mid, type: "message", role: "assistant", model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } }],
    ["content_block_start", { type: "content_block_start", index: 0, content_block: block.type === "tool_use" ? { ...block, input: {} } : { type: "text", text: "" } }],
    ["content_block_delta", { type: "content_block_delta", index: 0, delta: block.type === "tool_use" ? { type: "input_json_delta", partial_json: JSON.stringify(turn.kind === "tool" ? turn.args : {}) } : { type: "text_delta", text: (block as any).text } }],
    ["content_block_stop", { type: "content_block_stop", index: 0 }],
    ["message_delta", { type: "message_delta", delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: USAGE.output } }],
    ["message_stop", { type: "message_stop" }],
  ];
  return sse(events);
}

function geminiAnswer(turn: Turn, stream: boolean, model: string): Response {
  const part = turn.kind === "tool" ? { functionCall: { name: turn.name, args: turn.args } } : { text: turn.text };
  const body = {
    candidates: [{ content: { role: "model", parts: [part] }, finishReason: "STOP", index: 0 }],
    usageMetadata: { promptTokenCount: USAGE.input, candidatesTokenCount: USAGE.output, totalTokenCount: USAGE.input + USAGE.output },
    modelVersion: model,
    responseId: id("gem"),
  };
  return stream ? sse([[null, body]]) : json(body);
}

export function startPlayModel(): PlayModel {
  const apiKey = `sk-play-${crypto.randomUUID()}`;
  const calls: PlayedCall[] = [];
  const bodies: unknown[] = [];
  const state = { workdir: "/nonexistent" };
  const server = serveLoopback({
    idleTimeout: 60,
    async fetch(req) {
      const url = new URL(req.url);
      const path = url.pathname;
      const key = req.headers.get("authorization")?.replace(/^Bearer /, "") ?? req.headers.get("x-api-key") ?? req.headers.get("x-goog-api-key");
      if (key !== apiKey) return json({ error: { message: "Incorrect API key provided.", type: "invalid_request_error", code: "invalid_api_key" } }, 401);
      if (req.method !== "POST") return json({ error: { message: `No route for ${req.method} ${path}` } }, 404);
      let body: any;
      try { body = await req.json(); } catch { return json({ error: { message: "The body is not JSON." } }, 400); }
      bodies.push(body);
      const tools = offeredTools(body);
      let turn: Turn;
      let step: PlayedCall["step"];
      let tool: string | undefined;
      if (tools.length > 0 && !hasToolResult(body)) {
        const call = writeCall(tools, state.workdir);
        if (!call) return json({ error: { message: `The scripted model found no file-writing tool among: ${tools.map((t) => t.name).join(", ")}` } }, 400);
        turn = { kind: "tool", name: call.tool.name, args: call.args, ...(call.tool.namespace ? { namespace: call.tool.namespace } : {}) };
        step = "tool_call"; tool = call.tool.name;
      } else if (tools.length > 0) {
        turn = { kind: "text", text: ANSWER }; step = "answer";
      } else {
        turn = { kind: "text", text: wantsJson(body) ? JSON.stringify({ reasoning: "The task is finished.", next_speaker: "user" }) : "Hello" };
        step = "side";
      }
      const gem = path.match(/^\/google\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)$/);
      const stream = gem ? gem[2] === "streamGenerateContent" : Boolean(body.stream);
      calls.push({ path: gem ? `/google/v1beta/models/:${gem[2]}` : path, step, ...(tool ? { tool } : {}), stream });
      if (path === "/openai/v1/chat/completions") return chatAnswer(body, turn);
      if (path === "/openai/v1/responses") return responsesAnswer(body, turn);
      if (path === "/anthropic/v1/messages") return anthropicAnswer(body, turn);
      if (gem) return geminiAnswer(turn, stream, gem[1]!);
      return json({ error: { message: `No route for POST ${path}` } }, 404);
    },
  });
  return {
    ...server, calls, bodies, apiKey,
    get workdir() { return state.workdir; },
    set workdir(d: string) { state.workdir = d; },
  };
}
