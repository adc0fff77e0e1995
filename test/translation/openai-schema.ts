// OpenAI's own published OpenAPI document (test/fixtures/openai-openapi/, source noted there) as a
// validator: what the gateway sends a client is checked against exactly the schemas that strict
// clients and generated SDKs validate against.
import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import spec from "../fixtures/openai-openapi/openapi.subset.json";

// OpenAPI 3.1 schemas are JSON Schema 2020-12 plus annotation keywords (discriminator, x-*),
// which strict mode would refuse as unknown; they do not constrain values. Some schemas still
// carry OpenAPI 3.0's `nullable: true`; it is read as 3.0 defines it (null is also allowed),
// written the 2020-12 way. `unixtime` is OpenAI's own format: an integer.
function nullableAsJsonSchema(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(nullableAsJsonSchema);
  if (!v || typeof v !== "object") return v;
  const { nullable, ...rest } = v as Record<string, unknown>;
  const out = Object.fromEntries(Object.entries(rest).map(([k, x]) => [k, nullableAsJsonSchema(x)]));
  return nullable === true ? { anyOf: [out, { type: "null" }] } : out;
}
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
addFormats(ajv);
ajv.addFormat("unixtime", { type: "number", validate: (n: number) => Number.isInteger(n) });
ajv.addSchema(nullableAsJsonSchema(spec) as object, "openai");
const validators = new Map<string, ReturnType<typeof ajv.compile>>();

function validator(schema: string) {
  let v = validators.get(schema);
  if (!v) validators.set(schema, (v = ajv.compile({ $ref: `openai#/components/schemas/${schema}` })));
  return v;
}

/** What makes `value` not a valid `schema`, one line per error (path and message). */
export function schemaErrors(schema: string, value: unknown): string[] {
  const v = validator(schema);
  return v(value) ? [] : (v.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
}

/**
 * Throws, naming `where` and the first errors, unless `value` is a valid `schema` of OpenAI's
 * document. `tolerated`: errors the live answer it replays had too (a vendor's answer passed
 * through as sent, such as OpenAI's own `"user": null`); a replay is held to the live answer, not above it.
 */
export function expectValid(schema: string, value: unknown, where: string, tolerated: ReadonlySet<string> = new Set()): void {
  const errors = schemaErrors(schema, value).filter((e) => !tolerated.has(e));
  if (errors.length) throw new Error(`${where}: not a valid ${schema}:\n  ${errors.slice(0, 8).join("\n  ")}\n${JSON.stringify(value).slice(0, 600)}`);
}

// ResponseStreamEvent is a union of ~50 events told apart by `type`: validating against the
// union reports every variant's mismatch, so each event is checked against its own variant
// (the union's discriminator), and an event of a type the union lacks fails.
const EVENT_VARIANT = new Map<string, string>(
  ((spec as any).components.schemas.ResponseStreamEvent.anyOf as { $ref: string }[]).map((r) => {
    const name = r.$ref.split("/").at(-1)!;
    return [(spec as any).components.schemas[name].properties.type.enum[0] as string, name];
  }),
);

/** A Responses stream event: valid as its own variant of ResponseStreamEvent, and as the union. */
export function expectValidEvent(ev: any, where: string, tolerated: ReadonlySet<string> = new Set()): void {
  const variant = EVENT_VARIANT.get(ev.type);
  if (!variant) throw new Error(`${where}: OpenAI's ResponseStreamEvent has no event of type ${ev.type}`);
  expectValid(variant, ev, where, tolerated);
  // The union reports every variant's mismatch: when the event's own variant had only tolerated errors, so does the union.
  if (schemaErrors(variant, ev).length === 0) expectValid("ResponseStreamEvent", ev, where);
}

/** The schema errors of a live answer (JSON, or every event of a stream and the response a Responses stream ends with): what its replays may have too. */
export function liveErrors(shape: "chat" | "responses", live: { json?: unknown; events?: any[] }): Set<string> {
  const out = new Set<string>();
  const add = (schema: string, v: unknown, prefix = "") => {
    for (const e of schemaErrors(schema, v)) {
      out.add(e);
      // The same error inside a Responses event's `response` or `item`, and the reverse.
      if (prefix) out.add(e.startsWith(prefix) ? e.slice(prefix.length) || "/" : `${prefix}${e}`);
    }
  };
  if (live.json !== undefined) {
    add(shape === "chat" ? "CreateChatCompletionResponse" : "Response", live.json, "/response");
  }
  for (const ev of live.events ?? []) {
    if (shape === "chat") add("CreateChatCompletionStreamResponse", ev);
    else {
      const variant = EVENT_VARIANT.get(ev.type);
      if (variant) add(variant, ev, "/response");
      add("ResponseStreamEvent", ev, "/response");
      if (ev.response) add("Response", ev.response, "/response");
    }
  }
  return out;
}
