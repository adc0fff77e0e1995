// The Gemini `Schema` object (an OpenAPI 3.0 subset, type names often upper-case as Google's SDKs
// write them: "OBJECT", "STRING") → JSON Schema, for a Gemini client's tools and response schema
// on a lane of another protocol. The reverse of schema.ts. `nullable` becomes a type union with
// null; `propertyOrdering` (Gemini's own hint for the order of generated keys) is left out.
import type { Json } from "../types.ts";

const KEEP = new Set([
  "description", "format", "enum", "maxItems", "minItems", "minProperties", "maxProperties",
  "minLength", "maxLength", "pattern", "minimum", "maximum", "default", "title", "required",
]);

export function fromGeminiSchema(schema: unknown): Json {
  if (!schema || typeof schema !== "object" || Array.isArray(schema)) return {};
  const s = schema as Json;
  const out: Json = {};
  for (const [k, v] of Object.entries(s)) {
    if (KEEP.has(k)) out[k] = v;
    else if (k === "type" && typeof v === "string" && v !== "TYPE_UNSPECIFIED") out.type = v.toLowerCase();
    else if (k === "properties" && v && typeof v === "object") {
      out.properties = Object.fromEntries(Object.entries(v as Json).map(([name, sub]) => [name, fromGeminiSchema(sub)]));
    } else if (k === "items") out.items = fromGeminiSchema(v);
    else if (k === "anyOf" && Array.isArray(v)) out.anyOf = v.map(fromGeminiSchema);
    else if (k === "example") out.examples = [v];
  }
  if (s.nullable === true) {
    if (typeof out.type === "string") out.type = [out.type, "null"];
    else if (out.anyOf) out.anyOf = [...out.anyOf, { type: "null" }];
  }
  return out;
}
