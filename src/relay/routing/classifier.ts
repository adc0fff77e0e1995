// Classifier mode (CONTRACT §8): before forwarding, the key's classifier model picks the lane
// that fits the request; that lane is tried first and the rest of the chain follows in order.
//
// The prompt is two chat messages, sent to classifier_provider / classifier_model with the key's
// classifier credential (classifier_credential_id, else the account's oldest saved key for that
// provider) through that provider's registered adapter and codec, so any vendor works:
//
//   system:
//     <classifier_instructions>
//
//     Categories (category_key: category_description):
//     - <category_key>: <category_description>
//     - ...
//
//     Answer with exactly one category_key from the list above and nothing else.
//   user:
//     <the request's last user message, text parts joined, at most 8000 characters>
//
// Only lanes with a category_key are listed (several lanes may share one; they all move up, in
// chain order). The answer is matched to a key ignoring case, surrounding quotes, backticks and
// punctuation; an answer that names no listed key, or a classifier that fails or times out,
// leaves the chain order as it is. No call is made when fewer than two categories exist.
//
// The call goes through the same lane attempt as every relayed request (relay/attempt.ts) and is
// metered like one: on a key with a budget its worst case is reserved before it is sent (the
// budget is a ceiling for the classifier's spend too; near the end of the budget its output limit
// is lowered, and when not even its prompt fits the classification is skipped), then one usage
// record with endpoint "classifier", its cost priced from the pricing catalog, settles it. It
// never takes from the key's rate limits: those count the client's requests.
import type { RelayDeps } from "../relay-deps.ts";
import type { AccessEntry } from "../../http/access-log.ts";
import { GatewayError } from "../../errors.ts";
import type { ChatRequest, Json } from "../../protocols/types.ts";
import { getAdapter } from "../../providers/registry.ts";
import type { ResolvedLane } from "../../providers/types.ts";
import { tryLane, type RelayRequest } from "../attempt.ts";
import { estimateRequest } from "../../money/estimate.ts";
import { MoneyCall } from "../../money/money.ts";
import { withOutputLimit } from "../../money/output-limits.ts";
import type { KeyContext } from "../key-context.ts";

const TIMEOUT_MS = 15_000;
const MAX_MESSAGE_CHARS = 8000;

/** The classifier's chat messages for a request (exported for tests and the README). */
export function classifierMessages(instructions: string, categories: Array<{ key: string; description: string | null }>, userText: string): Json[] {
  const list = categories.map((c) => `- ${c.key}: ${c.description ?? ""}`.trimEnd()).join("\n");
  const system = `${instructions.trim()}\n\nCategories (category_key: category_description):\n${list}\n\nAnswer with exactly one category_key from the list above and nothing else.`;
  return [
    { role: "system", content: system },
    { role: "user", content: userText.slice(0, MAX_MESSAGE_CHARS) },
  ];
}

/** Text of the request's last user message (string content, or its text parts joined). */
export function lastUserText(req: ChatRequest): string {
  for (let i = req.messages.length - 1; i >= 0; i--) {
    const m = req.messages[i];
    if (m?.role !== "user") continue;
    if (typeof m.content === "string") return m.content;
    if (Array.isArray(m.content)) {
      return m.content.map((p: Json) => (typeof p?.text === "string" ? p.text : "")).filter(Boolean).join("\n");
    }
    return "";
  }
  return "";
}

/** The listed category an answer names, or null for anything else. */
export function matchCategory(answer: string, keys: string[]): string | null {
  const clean = (s: string) => trimChars(s, LEAD, TRAIL).toLowerCase();
  const a = clean(answer.split("\n")[0] ?? "");
  const exact = keys.find((k) => clean(k) === a);
  if (exact !== undefined) return exact;
  // A short answer such as "category: code" names one key as a whole word.
  if (answer.length > 200) return null;
  const lower = answer.toLowerCase();
  const named = keys.filter((k) => new RegExp(`(^|[^\\w-])${escapeRe(k.toLowerCase())}($|[^\\w-])`).test(lower));
  return named.length === 1 ? named[0]! : null;
}

const LEAD = new Set(`"'\`*`);
const TRAIL = new Set(`"'\`*.,;:!`);
const isSpace = (c: string) => c.trim() === "";

/**
 * `s` without leading spaces, quotes and stars and trailing ones with punctuation. A scan from
 * each end: the regex it replaces (/[…]+$/) restarted at every space of a long answer and was
 * quadratic in the classifier model's text.
 */
function trimChars(s: string, lead: Set<string>, trail: Set<string>): string {
  let i = 0;
  let j = s.length;
  while (i < j && (lead.has(s[i]!) || isSpace(s[i]!))) i++;
  while (j > i && (trail.has(s[j - 1]!) || isSpace(s[j - 1]!))) j--;
  return s.slice(i, j);
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The chain with the lanes of `chosen` first, the rest in their order. */
export function reorder(lanes: ResolvedLane[], chosen: string): ResolvedLane[] {
  const first = lanes.filter((l) => l.category_key === chosen);
  return [...first, ...lanes.filter((l) => l.category_key !== chosen)];
}

// The classifier "lane" of a key, built once per cached KeyContext so the adapter's decrypted
// key (kept on the lane object) is reused while the key stays cached.
const classifierLanes = new WeakMap<KeyContext, ResolvedLane>();

function classifierLane(key: KeyContext): ResolvedLane {
  let lane = classifierLanes.get(key);
  if (!lane) {
    lane = {
      provider: key.classifierProvider!,
      model: key.classifierModel,
      credential_id: key.classifierCredential?.id ?? null,
      sub_session_id: null,
      bridge_instance_id: null,
      category_key: null,
      category_description: null,
      fallback_to_default_model: false,
      reasoning_effort: null,
      verbosity: null,
      service_tier: null,
      index: -1,
      credential: key.classifierCredential,
      bridge: null,
      subSession: null,
    };
    classifierLanes.set(key, lane);
  }
  return lane;
}

interface Outcome {
  status: number;
  code: string | null;
  answer: string | null;
}

/**
 * Asks the classifier model through the same lane attempt as every relayed request (tryLane:
 * the adapter's prepare and send, the codec, timeouts, one usage record through the money owner),
 * on a lane made of the classifier's provider, model and credential.
 */
async function ask(ctx: RelayDeps, key: KeyContext, lane: ResolvedLane, model: string, messages: Json[], signal: AbortSignal, record: AccessEntry, tags: string[] | null): Promise<Outcome> {
  let body: Json = { model, messages };
  const est = key.monthlyBudgetUsd === null ? null : estimateRequest(ctx, key, body, undefined, [lane]);
  // Throws 402 when the budget cannot hold even the prompt (the caller keeps the chain order).
  // The request's tags (CONTRACT §9) on the classifier's record too: its cost is the request's.
  const money = await MoneyCall.reserveFor(ctx, key, { requestId: null, endpoint: "classifier", model, tags }, est);
  if (money.outputLimit !== null) body = withOutputLimit(body, "chat", money.outputLimit);
  const rr: RelayRequest = {
    ctx, key, endpoint: "classifier", shape: "chat", body, bytes: JSON.stringify(body).length, stream: false,
    model, requestId: "classifier", signal, money, access: record,
  };
  // Its attempt goes into the request's record beside the lanes: counted in the metrics, not listed as a lane.
  record.asideStarted(lane.provider, lane.index);
  try {
    const r = await tryLane(rr, lane);
    if (r.kind === "json") {
      const content = r.parsed?.choices?.[0]?.message?.content;
      const answer = typeof content === "string" ? content : Array.isArray(content) ? content.map((p: Json) => p?.text ?? "").join("") : null;
      return { status: r.status, code: null, answer };
    }
    if (r.kind === "failed") return { status: r.failure.status, code: r.failure.code, answer: null };
    if (r.kind === "client") return { status: r.error.status, code: r.error.code ?? null, answer: null };
    return { status: 0, code: r.kind === "aborted" ? "client_closed" : "unexpected_stream", answer: null };
  } finally {
    // Metering never holds up the request (the settlement is sent in the background).
    money.settle();
  }
}

/** Classifier mode: the key's lanes with the classifier's pick first (the chain as stored when it cannot pick). */
export async function classifyLanes(ctx: RelayDeps, key: KeyContext, req: ChatRequest, signal: AbortSignal, record: AccessEntry, tags: string[] | null = null): Promise<ResolvedLane[]> {
  const lanes = key.lanes;
  const categories: Array<{ key: string; description: string | null }> = [];
  for (const l of lanes) {
    if (l.category_key && !categories.some((c) => c.key === l.category_key)) categories.push({ key: l.category_key, description: l.category_description });
  }
  if (categories.length < 2) return lanes;
  const adapter = key.classifierProvider ? getAdapter(key.classifierProvider) : undefined;
  const model = key.classifierModel;
  if (!adapter || !model || !key.classifierInstructions) {
    ctx.log.warn({ keyId: key.id, provider: key.classifierProvider }, "classifier not usable; chain order kept");
    return lanes;
  }
  const messages = classifierMessages(key.classifierInstructions, categories, lastUserText(req));
  const callSignal = AbortSignal.any([signal, AbortSignal.timeout(TIMEOUT_MS)]);
  let o: Outcome;
  try {
    o = await ask(ctx, key, classifierLane(key), model, messages, callSignal, record, tags);
  } catch (e) {
    record.noteRefusal("classifier", e);
    o = { status: 0, code: e instanceof GatewayError ? e.code ?? "upstream_error" : signal.aborted ? "client_closed" : "connection_error", answer: null };
  }
  if (o.answer === null) {
    ctx.log.warn({ keyId: key.id, provider: adapter.id, status: o.status, code: o.code }, "classifier failed; chain order kept");
    return lanes;
  }
  const chosen = matchCategory(o.answer, categories.map((c) => c.key));
  if (!chosen) {
    ctx.log.warn({ keyId: key.id, provider: adapter.id }, "classifier answered no listed category; chain order kept");
    return lanes;
  }
  return reorder(lanes, chosen);
}
