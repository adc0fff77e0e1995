// The tools of a Responses request as a chat lane sees them, and the way back. Codex (≥ 0.147)
// sends its tools in an `additional_tools` input item, grouped in `namespace` tools, and a freeform
// `custom` tool (apply_patch, with a grammar); chat has flat function tools only. Under the
// `adapt` policy every tool becomes a function tool: a namespaced one under a name that joins
// its namespace and its own name, a custom one with a single string parameter, `input`. The
// model's calls map back by name: a custom tool's call becomes a `custom_tool_call` item carrying
// `input`, a namespaced function's call a `function_call` with its `namespace` and own name, so
// the client runs the tool it declared. Pure.
import { badRequest } from "../../errors.ts";
import { sha256Hex } from "../../lib/crypto.ts";
import { AdaptLog } from "../adapt.ts";
import { unsupported } from "../pivot.ts";
import type { Json } from "../types.ts";

const LABEL = "non-Responses";
/** The chat name of a tool: what every lane's tool-name pattern allows (letters, digits, `_`, `-`; at most 64). */
const MAX_NAME = 64;

/** A tool as its client declared it, found by the name a lane knows it under. */
export interface ClientTool {
  kind: "function" | "custom";
  name: string;
  namespace?: string;
}

export interface ToolMap {
  /** Lane (chat) name → the client's tool; only tools whose lane name or kind differ are listed. */
  byLaneName: Map<string, ClientTool>;
  /** The lane name of a client tool. */
  laneName(name: string, namespace?: string): string;
}

/** The chat name of a client tool: its own name, or its namespace and name joined (`ns__name`), made fit for every lane. */
export function laneToolName(name: string, namespace?: string): string {
  const joined = namespace ? (namespace.endsWith("_") ? namespace + name : `${namespace}__${name}`) : name;
  const clean = joined.replace(/[^A-Za-z0-9_-]/g, "_");
  if (clean === joined && clean.length <= MAX_NAME) return clean;
  // Changed or too long: a short digest of the whole keeps it unique.
  const tail = `_${sha256Hex(joined).slice(0, 8)}`;
  return clean.slice(0, MAX_NAME - tail.length) + tail;
}

/** The freeform input's parameter schema, with the tool's format told in its description. */
function customParameters(t: Json): Json {
  const f = t.format;
  let about = "The tool's whole input, as free text.";
  if (f && typeof f === "object" && f.type === "grammar" && typeof f.definition === "string") {
    about = `The tool's whole input, as text that follows this ${typeof f.syntax === "string" ? f.syntax : ""} grammar exactly:\n${f.definition}`;
  }
  return { type: "object", properties: { input: { type: "string", description: about } }, required: ["input"], additionalProperties: false };
}

interface Collected {
  /** Chat function tools, in order. */
  tools: Json[];
  map: ToolMap;
}

function newMap(): ToolMap {
  return { byLaneName: new Map(), laneName: laneToolName };
}

/**
 * Adds one Responses tool (`tools[i]` or an additional_tools item's) to `out`. `where` names it in
 * errors. Namespaces and custom tools are refused under strict, as before.
 */
function addTool(t: unknown, where: string, out: Collected, log: AdaptLog | undefined, namespace?: string): void {
  if (!t || typeof t !== "object") throw badRequest(`${where} must be an object.`);
  const tool = t as Json;
  if (tool.type === "namespace" && !namespace) {
    if (!log?.adapting) unsupported(LABEL, `The hosted tool "namespace" (${where})`, "send function tools only, or route to an OpenAI lane");
    if (typeof tool.name !== "string" || !tool.name) throw badRequest(`${where}.name is required.`);
    if (!Array.isArray(tool.tools)) throw badRequest(`${where}.tools must be an array.`);
    log.note("tools.namespace", "mapped");
    tool.tools.forEach((c: unknown, j: number) => addTool(c, `${where}.tools[${j}]`, out, log, tool.name));
    return;
  }
  if (tool.type === "custom") {
    if (!log?.adapting) unsupported(LABEL, `The hosted tool "custom" (${where})`, "send function tools only, or route to an OpenAI lane");
    if (typeof tool.name !== "string" || !tool.name) throw badRequest(`${where}.name is required.`);
    log.note("tools.custom", "mapped");
    const name = laneToolName(tool.name, namespace);
    const fn: Json = { name, parameters: customParameters(tool) };
    if (typeof tool.description === "string" && tool.description) fn.description = tool.description;
    push(out, name, { kind: "custom", name: tool.name, ...(namespace ? { namespace } : {}) }, { type: "function", function: fn }, where);
    return;
  }
  if (tool.type !== "function") unsupported(LABEL, `The hosted tool ${JSON.stringify(tool.type)} (${where})`, "send function tools only, or route to an OpenAI lane");
  if (typeof tool.name !== "string" || !tool.name) throw badRequest(`${where}.name is required.`);
  const name = namespace ? laneToolName(tool.name, namespace) : tool.name;
  const fn: Json = { name };
  if (tool.description !== undefined && tool.description !== null) fn.description = tool.description;
  if (tool.parameters !== undefined && tool.parameters !== null) fn.parameters = tool.parameters;
  if (tool.strict !== undefined && tool.strict !== null) fn.strict = tool.strict;
  push(out, name, namespace ? { kind: "function", name: tool.name, namespace } : null, { type: "function", function: fn }, where);
}

function push(out: Collected, laneName: string, client: ClientTool | null, chatTool: Json, where: string): void {
  if (out.tools.some((t) => t.function.name === laneName)) throw badRequest(`${where}: two tools would share the name "${laneName}"; give every tool its own name.`);
  out.tools.push(chatTool);
  if (client) out.map.byLaneName.set(laneName, client);
}

/**
 * A Responses request's tools as chat tools: `tools`, then the tools of every `additional_tools`
 * input item (adapt; refused under strict, as before), and the map back to the client's names.
 */
export function collectTools(body: Json, log: AdaptLog | undefined): Collected {
  const out: Collected = { tools: [], map: newMap() };
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw badRequest("`tools` must be an array.");
    body.tools.forEach((t: unknown, i: number) => addTool(t, `tools[${i}]`, out, log));
  }
  if (Array.isArray(body.input)) {
    body.input.forEach((item: Json, i: number) => {
      if (item?.type !== "additional_tools") return;
      if (!log?.adapting) unsupported(LABEL, `An input item of type "additional_tools" (input[${i}])`, "send messages, function calls and function call outputs");
      if (!Array.isArray(item.tools)) throw badRequest(`input[${i}].tools must be an array.`);
      log.note("additional_tools", "mapped");
      item.tools.forEach((t: unknown, j: number) => addTool(t, `input[${i}].tools[${j}]`, out, log));
    });
  }
  return out;
}

/**
 * The map back for an answer (from-pivot, the stream encoder): null when the request declared no
 * namespaced or custom tool, the usual case, which costs one look at `tools` and at the input
 * items' types. The request was accepted, so its tools are well formed.
 */
export function toolMapOf(request: Json): ToolMap | null {
  const declares = (tools: unknown) => Array.isArray(tools) && tools.some((t) => t?.type === "namespace" || t?.type === "custom");
  const extra = Array.isArray(request.input) && request.input.some((it: Json) => it?.type === "additional_tools");
  if (!extra && !declares(request.tools)) return null;
  try {
    // Only the map is wanted: the notes of this log are the request's, already taken.
    const { map } = collectTools(request, new AdaptLog("adapt"));
    return map.byLaneName.size ? map : null;
  } catch {
    return null;
  }
}

/** A chat tool call → the client's output item (without `id` and `status`, which the caller sets). */
export function clientCallItem(map: ToolMap | null, callId: string, laneName: string, args: string): Json {
  const t = map?.byLaneName.get(laneName);
  if (t?.kind === "custom") {
    return { type: "custom_tool_call", call_id: callId, name: t.name, input: customInput(args), ...(t.namespace ? { namespace: t.namespace } : {}) };
  }
  return { type: "function_call", arguments: args, call_id: callId, name: t ? t.name : laneName, ...(t?.namespace ? { namespace: t.namespace } : {}) };
}

/** The freeform input out of the call's arguments (`{"input": "…"}`); arguments that are not that object are the input as they are. */
export function customInput(args: string): string {
  try {
    const v = JSON.parse(args);
    if (v && typeof v === "object" && typeof v.input === "string") return v.input;
  } catch { /* not JSON: the text is the input */ }
  return args;
}
