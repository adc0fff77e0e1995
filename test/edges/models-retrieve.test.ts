// CONTRACT §8 models: GET /v1/models/{id} answers the model object (the official openai SDK's
// models.retrieve works), 404 model_not_found in the OpenAI shape when unknown; list entries are
// real model ids only, never the pricing catalog's patterns or fragments.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startRelayWorld, type RelayWorld } from "../helpers/relay-world.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { addRoutingKey, lane } from "../relay/fixtures.ts";
import { isRealModelId } from "../../src/relay/models.ts";

let gw: TestGateway;
let A: MockUpstream;
let key: { raw: string };
let w: RelayWorld<"openai">;
beforeAll(async () => {
  w = await startRelayWorld({ providers: ["openai"] });
  ({ gw, up: { openai: A } } = w);
  key = await addRoutingKey(gw, w.acct.id, { lanes: [lane("openai", w.cred.openai.id, { model: "gpt-4o-mini" })] });
}, 60_000);
afterAll(() => w?.stop(), 60_000);

describe(`CONTRACT §8: GET /v1/models/{id} and real ids only (${storesLabel})`, () => {
  test("the official openai SDK's models.retrieve gets the model object for a model the key serves", async () => {
    const client = new OpenAI({ apiKey: key.raw, baseURL: `${gw.url}/v1` });
    const m = await client.models.retrieve("gpt-4o-mini");
    expect(m).toMatchObject({ id: "gpt-4o-mini", object: "model", owned_by: "openai" });
    expect(Number.isInteger(m.created)).toBe(true);
  });

  test("an unknown model is 404 in the OpenAI shape (the SDK raises NotFoundError)", async () => {
    const client = new OpenAI({ apiKey: key.raw, baseURL: `${gw.url}/v1` });
    const err = await client.models.retrieve("no-such-model").then(() => null, (e) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    const r = await gw.call("/v1/models/no-such-model", { token: key.raw });
    expect(r.status).toBe(404);
    expect(r.body.error).toEqual({ message: expect.stringContaining("no-such-model"), type: "invalid_request_error", param: "model", code: "model_not_found" });
  });

  test("an alias with a slash (sub/flagship) is retrievable from the general catalog, URL-encoded as the SDK sends it", async () => {
    const r = await gw.call(`/v1/models/${encodeURIComponent("sub/flagship")}`);
    expect(r.status).toBe(200);
    expect(r.body.id).toBe("sub/flagship");
  });

  test("list entries are real ids only: no catalog patterns or fragments", async () => {
    const r = await gw.call("/v1/models");
    const ids = (r.body.data as Array<{ id: string }>).map((m) => m.id);
    for (const bad of ["ft:gpt-3.5-turbo-", "gpt-4o-mini-2024-07-18.ft-", "gpt-4o:extended"]) expect(ids).not.toContain(bad);
    expect(ids.filter((id) => !isRealModelId(id))).toEqual([]);
    expect(ids).toContain("gpt-4o-mini");
    expect(isRealModelId("anthropic.claude-3-5-sonnet-20240620-v1:0")).toBe(true);
  });
});
