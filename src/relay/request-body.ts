// Reading and validating an inference body: the size cap and the nesting limit first (413 and 400,
// before any parsing: http/body.ts), one JSON.parse, then the fields SPEC requires. Missing
// `model` and the client protocol's own required fields (protocols/required-fields.ts) answer 400
// in the nested shape with type invalid_request_error and no code (CONTRACT §6). Every other
// property rides along untouched.
import { NOT_OBJECT, parseJsonText, parseJsonTextWithMembers, readText } from "../http/body.ts";
import type { ClientShape, Json } from "../protocols/types.ts";
import { invalidRequest as invalid, requiredFields } from "../protocols/required-fields.ts";
import { MIN_REUSE_CHARS, rememberSource } from "../protocols/wire-json.ts";

export interface InferenceBody {
  body: Json;
  bytes: number;
  stream: boolean;
  model: string;
  /** The request's tags (CONTRACT §9: relay/tags.ts), set by the relay once the body is read; null when untagged. */
  tags?: string[] | null;
}

/** What a protocol says in its URL rather than its body (Gemini: the model and whether to stream). */
export interface FromPath {
  model: string;
  stream: boolean;
}

export async function readInferenceBody(request: Request, shape: ClientShape, maxBytes: number, fromPath?: FromPath): Promise<InferenceBody> {
  const raw = await readText(request, maxBytes);
  // A long body's walk for the nesting limit also maps its top-level members, for a pass-through lane.
  const { value: body, members } = raw.text.length >= MIN_REUSE_CHARS ? parseJsonTextWithMembers(raw.text, invalid) : { value: parseJsonText(raw.text, invalid), members: null };
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw invalid(NOT_OBJECT);
  const b = body as Json;
  if (fromPath) {
    // The body's own members are mapped first; the URL's model and stream are the relay's, set
    // on it for every reader downstream and left out again of a pass-through lane's body.
    rememberSource(b, raw.text, members);
    b.model = fromPath.model;
    b.stream = fromPath.stream;
    requiredFields[shape].check(b);
    return { body: b, bytes: raw.bytes, stream: fromPath.stream, model: fromPath.model };
  }
  if (typeof b.model !== "string" || b.model === "") throw invalid("Missing required parameter: `model` (a string naming the model).", "model");
  const rule = requiredFields[shape];
  rule.check(b);
  if (!rule.streams) return { body: b, bytes: raw.bytes, stream: false, model: b.model };
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== "boolean") throw invalid("`stream` must be a boolean.", "stream");
  // A pass-through lane's body reuses this text for the values it leaves as they are (wire-json.ts).
  rememberSource(b, raw.text, members);
  return { body: b, bytes: raw.bytes, stream: b.stream === true, model: b.model };
}
