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

/** Throws, naming `where` and the first errors, unless `value` is a valid `schema` of OpenAI's document. */
export function expectValid(schema: string, value: unknown, where: string): void {
  let v = validators.get(schema);
  if (!v) validators.set(schema, (v = ajv.compile({ $ref: `openai#/components/schemas/${schema}` })));
  if (!v(value)) {
    const errors = (v.errors ?? []).slice(0, 8).map((e) => `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
    throw new Error(`${where}: not a valid ${schema}:\n  ${errors.join("\n  ")}\n${JSON.stringify(value).slice(0, 600)}`);
  }
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
export function expectValidEvent(ev: any, where: string): void {
  const variant = EVENT_VARIANT.get(ev.type);
  if (!variant) throw new Error(`${where}: OpenAI's ResponseStreamEvent has no event of type ${ev.type}`);
  expectValid(variant, ev, where);
  expectValid("ResponseStreamEvent", ev, where);
}
