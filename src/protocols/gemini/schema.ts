// JSON Schema (what chat clients send for tool parameters and response_format) → the Gemini
// `Schema` object, an OpenAPI 3.0 subset. Keywords Gemini does not know make it answer 400, so
// they are left out when they only annotate or loosen (additionalProperties, $schema, title of
// the root…), converted where an equivalent exists (type unions with null → nullable, const →
// enum), and refused where dropping them would change what the schema accepts ($ref, allOf…).
import { unsupported } from "../pivot.ts";
import type { Json } from "../types.ts";

const LABEL = "gemini";
const KEEP = new Set([
  "description", "format", "enum", "maxItems", "minItems", "minProperties", "maxProperties",
  "minLength", "maxLength", "pattern", "minimum", "maximum", "example", "default", "title", "propertyOrdering",
]);
// Annotations and loosenings whose absence cannot make a valid answer invalid.
const DROP = new Set(["$schema", "$id", "$comment", "additionalProperties", "examples", "readOnly", "writeOnly", "deprecated", "strict", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "uniqueItems", "contentMediaType", "contentEncoding"]);

export function toGeminiSchema(schema: unknown, where: string): Json {
  if (schema === true || schema === undefined) return {};
  if (!schema || typeof schema !== "object" || Array.isArray(schema)) return unsupported(LABEL, `A non-object JSON Schema at ${where}`);
  const s = schema as Json;
  const out: Json = {};
  for (const [k, v] of Object.entries(s)) {
    if (KEEP.has(k)) {
      out[k] = v;
    } else if (k === "type") {
      if (Array.isArray(v)) {
        const types = v.filter((t) => t !== "null");
        if (types.length !== 1) unsupported(LABEL, `A JSON Schema type union ${JSON.stringify(v)} at ${where}`, "use a single type (optionally with null) or anyOf");
        out.type = types[0];
        if (types.length !== v.length) out.nullable = true;
      } else if (v === "null") out.nullable = true;
      else out.type = v;
    } else if (k === "nullable") out.nullable = v;
    else if (k === "const") out.enum = [v];
    else if (k === "properties" && v && typeof v === "object") {
      out.properties = Object.fromEntries(Object.entries(v as Json).map(([name, sub]) => [name, toGeminiSchema(sub, `${where}.properties.${name}`)]));
    } else if (k === "items") out.items = toGeminiSchema(v, `${where}.items`);
    else if (k === "required") out.required = v;
    else if (k === "anyOf" || k === "oneOf") {
      // oneOf cannot be told apart from anyOf by a generated answer that matches one branch.
      const branches = (v as unknown[]).filter((b) => !(b && typeof b === "object" && (b as Json).type === "null"));
      if (branches.length !== (v as unknown[]).length) out.nullable = true;
      if (branches.length === 1) Object.assign(out, toGeminiSchema(branches[0], `${where}.${k}[0]`));
      else out.anyOf = branches.map((b, i) => toGeminiSchema(b, `${where}.${k}[${i}]`));
    } else if (DROP.has(k)) continue;
    else if (k === "$defs" || k === "definitions" || k === "$ref" || k === "allOf" || k === "not" || k === "if" || k === "patternProperties" || k === "dependentRequired") {
      unsupported(LABEL, `The JSON Schema keyword \`${k}\` (at ${where})`, "inline the schema without it");
    } else continue; // Unknown vendor keywords (x-…) annotate only.
  }
  if (out.enum && out.type === undefined) out.type = "string";
  if (out.enum && out.type !== "string") {
    // Gemini enums are string-only: a numeric or boolean enum is stated as strings of a string type.
    unsupported(LABEL, `A non-string enum (at ${where})`, "use string enum values");
  }
  return out;
}

/** Tool parameters: an object schema with no properties is sent as no parameters (Gemini rejects an empty OBJECT). */
export function toGeminiParameters(schema: unknown, where: string): Json | undefined {
  if (schema === undefined || schema === null) return undefined;
  const s = toGeminiSchema(schema, where);
  if (s.type === "object" && (!s.properties || Object.keys(s.properties).length === 0)) return undefined;
  return s;
}
