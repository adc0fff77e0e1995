// The OpenAI Batch API over the routing key (CONTRACT §9 "Batch work", §7 money), end to end with
// the official `openai` SDK: files and batches in OpenAI's published shapes, lines through the
// key's lanes, one usage record per line at its real cost, ownership, validation, cancel, and the
// budget refusing a batch whose worst case does not fit before anything is stored.
import { describe, expect, test } from "bun:test";
import { eq, like } from "drizzle-orm";
import OpenAI, { toFile } from "openai";
import { storesLabel } from "../helpers/gateway.ts";
import { useBlitzWorld } from "../helpers/relay-world.ts";
import { expectValid } from "../translation/openai-schema.ts";
import { batchFiles, blitzJobs, usageRecords } from "../../src/store/db/schema/index.ts";
import { batchWorstCase } from "../../src/blitz/batches/admission.ts";
import { addRoutingKey, keyContextOf, lane } from "../helpers/relay-world.ts";
import { priceUsd } from "../../src/money/pricing.ts";
import { relayDeps } from "../../src/relay/relay-deps.ts";
import { monthSpendUsd } from "../../src/money/counters.ts";

const chatLine = (id: string, content: string, mock: object = {}, extra: object = {}) =>
  JSON.stringify({ custom_id: id, method: "POST", url: "/v1/chat/completions", body: { model: "gpt-4o-mini", max_tokens: 20, messages: [{ role: "user", content }], mock, ...extra } });

async function ended(client: OpenAI, id: string, ms = 30_000) {
  for (const until = Date.now() + ms; ; await Bun.sleep(50)) {
    const b = await client.batches.retrieve(id);
    if (["completed", "cancelled", "failed", "expired"].includes(b.status)) return b;
    if (Date.now() > until) throw new Error(`batch did not end: ${JSON.stringify(b)}`);
  }
}
const jsonl = (text: string) => text.split("\n").filter(Boolean).map((l) => JSON.parse(l));

describe(`/v1/files + /v1/batches (${storesLabel})`, () => {
  const w = useBlitzWorld();
  const client = (raw: string) => new OpenAI({ apiKey: raw, baseURL: `${w.gw.url}/v1`, maxRetries: 0 });
  const recordsOf = (batchId: string) => w.records(like(usageRecords.requestId, `${batchId}.%`));
  /** The key's month counter (spend and what is in flight), after every settlement went out. */
  const spendOf = async (keyId: string) => {
    await w.flush();
    await w.gw.ctx.services.settleBatcher.flush();
    return (await monthSpendUsd(w.gw.ctx, { id: keyId, monthlyBudgetUsd: 10, budgetExcludesSeats: true })).usd;
  };
  /** The counter once it equals `usd` (Redis mode sends settlements in batches, off the request path), else its last value. */
  const spendSettledTo = async (keyId: string, usd: number) => {
    let last = 0;
    for (const end = Date.now() + 10_000; Date.now() < end; await Bun.sleep(100)) if (Math.abs((last = await spendOf(keyId)) - usd) < 1e-9) break;
    return last;
  };

  test("CONTRACT §9 Batch work: the openai SDK uploads, creates, retrieves, lists and reads the results; records = lines, the key's spend = their sum", async () => {
    const key = await w.oneLane();
    const c = client(key.raw);
    const n = 30;
    const lines = Array.from({ length: n }, (_, i) => chatLine(`req-${i}`, `B1 p${i}.`, { content: `answer ${i}`, prompt_tokens: 10 + i, completion_tokens: 3 }));
    const file = await c.files.create({ file: await toFile(Buffer.from(lines.join("\n") + "\n"), "in.jsonl"), purpose: "batch" });
    expectValid("OpenAIFile", file, "files.create");
    expect(file).toMatchObject({ object: "file", purpose: "batch", filename: "in.jsonl", bytes: Buffer.byteLength(lines.join("\n") + "\n") });
    expect(file.id).toMatch(/^file-/);
    expectValid("OpenAIFile", await c.files.retrieve(file.id), "files.retrieve");
    expect(await (await c.files.content(file.id)).text()).toBe(lines.join("\n") + "\n");

    const batch = await c.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h", metadata: { run: "b1" } });
    expectValid("Batch", batch, "batches.create");
    expect(batch).toMatchObject({ object: "batch", endpoint: "/v1/chat/completions", input_file_id: file.id, completion_window: "24h", metadata: { run: "b1" } });
    expect(["validating", "in_progress", "finalizing", "completed"]).toContain(batch.status);
    expect(batch.request_counts!.total).toBe(n);

    const done = await ended(c, batch.id);
    expectValid("Batch", done, "batches.retrieve");
    expect(done.status).toBe("completed");
    expect(done.request_counts).toEqual({ total: n, completed: n, failed: 0 });
    expect(done.output_file_id).toMatch(/^file-/);
    expect(done.error_file_id).toBeUndefined();
    expect(done.completed_at).toEqual(expect.any(Number));

    const outFile = await c.files.retrieve(done.output_file_id!);
    expectValid("OpenAIFile", outFile, "output file");
    expect(outFile.purpose).toBe("batch_output");
    const text = await (await c.files.content(done.output_file_id!)).text();
    expect(outFile.bytes).toBe(Buffer.byteLength(text));
    const out = jsonl(text);
    expect(out.map((l) => l.custom_id)).toEqual(Array.from({ length: n }, (_, i) => `req-${i}`));
    for (const [i, l] of out.entries()) {
      expect(l.id).toMatch(/^batch_req_/);
      expect(l.error).toBeNull();
      // The key's first lane is an openai lane: the lines went to OpenAI's Batch API (the mock's).
      expect(l.mode).toBe("batch");
      expect(l.response.status_code).toBe(200);
      expect(l.response.request_id).toBe(`${batch.id}.${i}`);
      expectValid("CreateChatCompletionResponse", l.response.body, `output line ${i}`);
      expect(l.response.body.choices[0].message.content).toBe(`answer ${i}`);
    }
    // One record per line, at its real cost; the key's month counter is their sum.
    const rows = await recordsOf(batch.id);
    expect(rows).toHaveLength(n);
    expect(new Set(rows.map((r) => r.requestId)).size).toBe(n);
    expect(rows.every((r) => r.endpoint === "batch" && r.outcome === "ok" && r.costUsd > 0)).toBe(true);
    const sum = rows.reduce((a, r) => a + r.costUsd, 0);
    expect(await spendSettledTo(key.id, sum)).toBeCloseTo(sum, 9);
    expect(done.usage).toMatchObject({ input_tokens: rows.reduce((a, r) => a + r.promptTokens, 0), output_tokens: 3 * n });
    // Every line reached the upstream exactly once: in one vendor batch, none live; each at half its live price.
    const vendorInputs = [...w.A.batch.files.values()].filter((f) => f.text.includes("B1 p0."));
    expect(vendorInputs).toHaveLength(1);
    for (let i = 0; i < n; i++) expect(vendorInputs[0]!.text.split(`B1 p${i}.`).length - 1).toBe(1);
    expect(w.A.received.filter((r) => JSON.stringify(r.body?.messages ?? "").includes("B1 p")).length).toBe(0);
    for (const r of rows) {
      const live = priceUsd("openai", "gpt-4o-mini", { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, cached_tokens: 0, cache_write_tokens: 0 }, null).usd;
      expect(r.costUsd).toBeCloseTo(live / 2, 12);
    }

    // Listing: newest first, paged by `after`.
    const second = await c.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const page1 = await c.batches.list({ limit: 1 });
    expectValid("ListBatchesResponse", { object: "list", data: page1.data, has_more: page1.has_more }, "batches.list");
    expect(page1.data.map((b) => b.id)).toEqual([second.id]);
    expect(page1.has_more).toBe(true);
    const all: string[] = [];
    for await (const b of c.batches.list({ limit: 1 })) all.push(b.id);
    expect(all).toEqual([second.id, batch.id]);
    await ended(c, second.id);
  }, 90_000);

  test("CONTRACT §9 Batch work: /v1/responses lines run through the key's lanes and answer Responses objects; a line the lanes refuse goes to the error file", async () => {
    const key = await w.twoLanes();
    const c = client(key.raw);
    const lines = [
      JSON.stringify({ custom_id: "r-ok", method: "POST", url: "/v1/responses", body: { model: "gpt-4o-mini", input: "B2 ok.", max_output_tokens: 20, mock: { content: "fine" } } }),
      JSON.stringify({ custom_id: "r-bad", method: "POST", url: "/v1/responses", body: { model: "gpt-4o-mini", input: "B2 bad.", max_output_tokens: 20, mock: { status: 400, error: { message: "bad thing", type: "invalid_request_error", code: "invalid_value", param: "input" } } } }),
    ];
    const file = await c.files.create({ file: await toFile(Buffer.from(lines.join("\n")), "r.jsonl"), purpose: "batch" });
    const batch = await c.batches.create({ input_file_id: file.id, endpoint: "/v1/responses", completion_window: "24h" });
    const done = await ended(c, batch.id);
    expect(done.request_counts).toEqual({ total: 2, completed: 1, failed: 1 });
    const out = jsonl(await (await c.files.content(done.output_file_id!)).text());
    expect(out).toHaveLength(1);
    expect(out[0].custom_id).toBe("r-ok");
    expect(out[0].response.body).toMatchObject({ object: "response", status: "completed" });
    expect(out[0].response.body.output[0].content[0].text).toBe("fine");
    const errs = jsonl(await (await c.files.content(done.error_file_id!)).text());
    expect(errs).toHaveLength(1);
    expectValid("ErrorResponse", errs[0].response.body, "error line");
    expect(errs[0]).toMatchObject({ custom_id: "r-bad", error: null, response: { status_code: 400, body: { error: { message: expect.stringContaining("bad thing"), type: "invalid_request_error" } } } });
    // Records: one per attempt of each line (the refused line stops at the first lane: a client fix).
    const rows = await recordsOf(batch.id);
    expect(rows.filter((r) => r.outcome === "ok")).toHaveLength(1);
  }, 60_000);

  test("CONTRACT §9 Batch work: files and batches belong to the key that created them (another key: 404 in OpenAI's shape)", async () => {
    const mine = await w.oneLane();
    const other = await w.oneLane();
    const c = client(mine.raw);
    const file = await c.files.create({ file: await toFile(Buffer.from(chatLine("a", "B3 p0.")), "a.jsonl"), purpose: "batch" });
    const batch = await c.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const o = client(other.raw);
    for (const call of [() => o.files.retrieve(file.id), () => o.files.content(file.id), () => o.batches.retrieve(batch.id), () => o.batches.cancel(batch.id),
      () => o.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" })]) {
      const err = await call().then(() => null, (e) => e);
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    }
    const raw = await w.gw.call(`/v1/batches/${batch.id}`, { token: other.raw });
    expect(raw.status).toBe(404);
    expect(raw.body.error).toEqual({ message: expect.stringContaining("No such Batch object"), type: "invalid_request_error", param: "id", code: "not_found" });
    expect((await o.batches.list()).data).toEqual([]);
    expect((await o.files.list()).data).toEqual([]);
    await ended(c, batch.id);
  }, 60_000);

  test("CONTRACT §9 Batch work: bad input is a 400 naming the line or field, never a 500, and nothing is stored", async () => {
    const key = await w.oneLane();
    const c = client(key.raw);
    const up = async (text: string) => c.files.create({ file: await toFile(Buffer.from(text), "x.jsonl"), purpose: "batch" });
    const create = async (text: string, endpoint = "/v1/chat/completions") => {
      const f = await up(text);
      return w.gw.call("/v1/batches", { token: key.raw, body: { input_file_id: f.id, endpoint, completion_window: "24h" } });
    };
    const cases: Array<[string, RegExp]> = [
      ["not json", /Line 1 .*not valid JSON/],
      [`${chatLine("a", "x")}\n${chatLine("a", "y")}`, /Line 2 of the input file: custom_id "a" is used by an earlier line/],
      [JSON.stringify({ custom_id: "a", method: "GET", url: "/v1/chat/completions", body: {} }), /method must be "POST"/],
      [JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/responses", body: { model: "m", input: "x" } }), /url is "\/v1\/responses"/],
      [JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/chat/completions", body: { messages: [] } }), /body.model is required/],
      [chatLine("a", "x", {}, { stream: true }), /stream must not be true/],
    ];
    for (const [text, re] of cases) {
      const r = await create(text);
      expect(r.status).toBe(400);
      expect(r.body.error.message).toMatch(re);
      expect(r.body.error).toMatchObject({ type: "invalid_request_error", param: "input_file_id" });
    }
    const good = await up(chatLine("a", "x"));
    for (const [body, param] of [
      [{ input_file_id: good.id, endpoint: "/v1/completions", completion_window: "24h" }, "endpoint"],
      [{ input_file_id: good.id, endpoint: "/v1/chat/completions", completion_window: "1h" }, "completion_window"],
      [{ endpoint: "/v1/chat/completions", completion_window: "24h" }, "input_file_id"],
    ] as const) {
      const r = await w.gw.call("/v1/batches", { token: key.raw, body });
      expect(r.status).toBe(400);
      expect(r.body.error.param).toBe(param);
    }
    // CONTRACT §8: text the store cannot hold (a NUL) is a 400 naming the field.
    const form = new FormData();
    form.set("purpose", "batch");
    form.set("file", new File([chatLine("a", "x\u0000y")], "n.jsonl"));
    const nul = await fetch(`${w.gw.url}/v1/files`, { method: "POST", headers: { authorization: `Bearer ${key.raw}` }, body: form });
    expect(nul.status).toBe(400);
    expect(((await nul.json()) as any).error).toMatchObject({ param: "file", message: expect.stringContaining("NUL") });
    const purpose = await c.files.create({ file: await toFile(Buffer.from("x"), "x.jsonl"), purpose: "assistants" }).then(() => null, (e: any) => e);
    expect(purpose).toBeInstanceOf(OpenAI.BadRequestError);
    expect((await w.gw.ctx.db.select().from(blitzJobs).where(eq(blitzJobs.routingKeyId, key.id)))).toHaveLength(0);
    // Unauthenticated: 401, in the nested shape.
    const anon = await fetch(`${w.gw.url}/v1/batches`);
    expect(anon.status).toBe(401);
  }, 60_000);

  test("CONTRACT §7 + §9 Batch work: a budget that fits 6 of 10 lines' worst case refuses the batch with 402 before anything is stored or sent", async () => {
    const probe = await w.oneLane();
    const lines = Array.from({ length: 10 }, (_, i) => chatLine(`b-${i}`, `B5 p${i}.`, {}, { max_tokens: 400 }));
    const kc = await keyContextOf(w.gw, probe.raw);
    const per = batchWorstCase(relayDeps(w.gw.ctx), { ...kc, monthlyBudgetUsd: 1 }, lines.slice(0, 1).map((l) => JSON.parse(l).body))!;
    // An openai first lane batches at half the live price: its worst case is halved too.
    const key = await w.oneLane({ monthlyBudgetUsd: per * 6.5 * 0.5 });
    const c = client(key.raw);
    const file = await c.files.create({ file: await toFile(Buffer.from(lines.join("\n")), "b.jsonl"), purpose: "batch" });
    const before = w.A.received.length;
    const err = await c.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }).then(() => null, (e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err.status).toBe(402);
    expect(err.error).toMatchObject({ code: "budget_exceeded", message: expect.stringContaining("nothing was stored or sent upstream") });
    expect(w.A.received.length).toBe(before);
    expect(await w.gw.ctx.db.select().from(blitzJobs).where(eq(blitzJobs.routingKeyId, key.id))).toHaveLength(0);
    expect(await recordsOf("batch_")).toEqual([]);
    // Six lines fit: that batch is taken and runs.
    const six = await c.files.create({ file: await toFile(Buffer.from(lines.slice(0, 6).join("\n")), "six.jsonl"), purpose: "batch" });
    const ok = await c.batches.create({ input_file_id: six.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const done = await ended(c, ok.id);
    expect(done.request_counts).toEqual({ total: 6, completed: 6, failed: 0 });
    expect(await spendOf(key.id)).toBeLessThanOrEqual(per * 6.5 * 0.5);
    const okSum = (await recordsOf(ok.id)).reduce((a, r) => a + r.costUsd, 0);
    expect(await spendSettledTo(key.id, okSum)).toBeCloseTo(okSum, 9);
  }, 60_000);

  test("CONTRACT §9 Batch work: cancel stops what has not started; what ran is charged and in the output file, the rest in the error file", async () => {
    // A groq first lane has no vendor batch API: the lines run live, one at a time.
    const key = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("groq", w.credB.id)], maxConcurrentRequests: 1 });
    const c = client(key.raw);
    const n = 12;
    const lines = Array.from({ length: n }, (_, i) => chatLine(`c-${i}`, `B6 p${i}.`, { latency_ms: 150 }));
    const file = await c.files.create({ file: await toFile(Buffer.from(lines.join("\n")), "c.jsonl"), purpose: "batch" });
    const batch = await c.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    for (const until = Date.now() + 10_000; Date.now() < until; await Bun.sleep(20)) if ((await c.batches.retrieve(batch.id)).request_counts!.completed >= 1) break;
    const cancelled = await c.batches.cancel(batch.id);
    expectValid("Batch", cancelled, "batches.cancel");
    expect(["cancelling", "cancelled"]).toContain(cancelled.status);
    const done = await ended(c, batch.id);
    expect(done.status).toBe("cancelled");
    expect(done.cancelled_at).toEqual(expect.any(Number));
    const ran = done.request_counts!.completed;
    expect(ran).toBeGreaterThanOrEqual(1);
    expect(ran).toBeLessThan(n);
    const out = jsonl(await (await c.files.content(done.output_file_id!)).text());
    const errs = jsonl(await (await c.files.content(done.error_file_id!)).text());
    expect(out.length + errs.length).toBe(n);
    expect(errs.every((e) => e.response === null && e.error.code === "batch_cancelled")).toBe(true);
    const rows = await recordsOf(batch.id);
    expect(rows).toHaveLength(out.length);
    const ranSum = rows.reduce((a, r) => a + r.costUsd, 0);
    expect(await spendSettledTo(key.id, ranSum)).toBeCloseTo(ranSum, 9);
    // The output files go with the batch's results.
    expect((await w.gw.ctx.db.select().from(batchFiles).where(eq(batchFiles.batchId, batch.id))).length).toBe(2);
  }, 60_000);
  test("CONTRACT §9 Batch work: a batch on OpenAI's Batch API passes /v1/responses and /v1/embeddings lines through; cancel cancels the vendor batch, its unanswered lines in the error file at $0", async () => {
    const key = await w.oneLane({ monthlyBudgetUsd: 10 });
    const c = client(key.raw);
    const emb = [0, 1, 2].map((i) => JSON.stringify({ custom_id: `e-${i}`, method: "POST", url: "/v1/embeddings", body: { model: "text-embedding-3-small", input: `B8 text ${i}` } }));
    const ef = await c.files.create({ file: await toFile(Buffer.from(emb.join("\n")), "e.jsonl"), purpose: "batch" });
    const eb = await ended(c, (await c.batches.create({ input_file_id: ef.id, endpoint: "/v1/embeddings", completion_window: "24h" })).id);
    expect(eb.request_counts).toEqual({ total: 3, completed: 3, failed: 0 });
    const eout = jsonl(await (await c.files.content(eb.output_file_id!)).text());
    expect(eout.every((l) => l.mode === "batch" && l.response.body.object === "list" && l.response.body.data[0].embedding.length === 4)).toBe(true);
    const vendorEmb = [...w.A.batch.batches.values()].filter((b) => w.A.batch.files.get(b.input_file_id)?.text.includes("B8 text"));
    expect(vendorEmb.map((b) => b.endpoint)).toEqual(["/v1/embeddings"]);
    const embRows = await recordsOf(eb.id);
    expect(embRows).toHaveLength(3);
    for (const r of embRows) {
      const live = priceUsd("openai", "text-embedding-3-small", { prompt_tokens: r.promptTokens, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 }, null).usd;
      expect(r.promptTokens).toBeGreaterThan(0);
      expect(live).toBeGreaterThan(0);
      expect(r.costUsd).toBeCloseTo(live / 2, 15);
    }

    w.A.batch.setOptions({ hold: true });
    const lines = Array.from({ length: 8 }, (_, i) => JSON.stringify({ custom_id: `r-${i}`, method: "POST", url: "/v1/responses", body: { model: "gpt-4o-mini", input: `B8 p${i}.`, max_output_tokens: 20 } }));
    const file = await c.files.create({ file: await toFile(Buffer.from(lines.join("\n")), "r.jsonl"), purpose: "batch" });
    const batch = await c.batches.create({ input_file_id: file.id, endpoint: "/v1/responses", completion_window: "24h" });
    const atVendor = () => [...w.A.batch.batches.values()].find((b) => w.A.batch.files.get(b.input_file_id)?.text.includes("B8 p0."));
    for (const until = Date.now() + 30_000; !atVendor(); await Bun.sleep(50)) if (Date.now() > until) throw new Error("no vendor batch");
    expect(atVendor()!.endpoint).toBe("/v1/responses");
    const cancelled = await c.batches.cancel(batch.id);
    expect(["cancelling", "cancelled"]).toContain(cancelled.status);
    w.A.batch.setOptions({});
    const done = await ended(c, batch.id);
    expect(done.status).toBe("cancelled");
    expect(atVendor()!.status).toBe("cancelled");
    const errs = jsonl(await (await c.files.content(done.error_file_id!)).text());
    expect(errs).toHaveLength(8);
    expect(errs.every((e) => e.response === null && e.error.code === "batch_cancelled")).toBe(true);
    expect((await recordsOf(batch.id)).every((r) => r.costUsd === 0)).toBe(true);
    expect(w.A.received.filter((r) => JSON.stringify(r.body ?? "").includes("B8 p")).length).toBe(0);
  }, 60_000);

  test("CONTRACT §9 Batch work: POST /blitz/jobs with completion_window \"24h\" refuses a job whose summed worst case does not fit (402, nothing stored), runs one that fits, and each result says how it ran", async () => {
    const probe = await w.oneLane();
    const kc = await keyContextOf(w.gw, probe.raw);
    const prompt = (i: number) => ({ messages: [{ role: "user", content: `B7 p${i}.` }] });
    const per = batchWorstCase(relayDeps(w.gw.ctx), { ...kc, monthlyBudgetUsd: 1 }, [{ model: "gpt-4o-mini", max_tokens: 400, ...prompt(0) }])!;
    // An openai lane batches at half the live price (CONTRACT §9): 6 items fit, 10 do not.
    const key = await w.oneLane({ monthlyBudgetUsd: per * 6.5 * 0.5 });
    const before = w.A.received.length;
    const uploads = w.A.batch.uploads;
    const refused = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 400, completion_window: "24h", prompts: Array.from({ length: 10 }, (_, i) => prompt(i)) } });
    expect(refused.status).toBe(402);
    expect(refused.body).toMatchObject({ code: "budget_exceeded", error: expect.stringContaining("nothing was stored") });
    expect(w.A.received.length).toBe(before);
    expect(w.A.batch.uploads).toBe(uploads);
    expect(await w.gw.ctx.db.select().from(blitzJobs).where(eq(blitzJobs.routingKeyId, key.id))).toHaveLength(0);
    const bad = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", completion_window: "1h", prompts: [prompt(0)] } });
    expect(bad.status).toBe(400);
    const ok = await w.gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 400, mode: "batch", prompts: Array.from({ length: 6 }, (_, i) => prompt(i)) } });
    expect(ok.status).toBe(202);
    let job: any;
    for (const until = Date.now() + 30_000; Date.now() < until; await Bun.sleep(50)) {
      job = (await w.gw.call(`/blitz/jobs/${ok.body.id}`, { token: key.raw })).body;
      if (job.progress.remaining === 0) break;
    }
    expect(job.progress.succeeded).toBe(6);
    expect(job.results.every((r: any) => r.mode === "batch")).toBe(true);
    // Neither field went upstream: they are the job's, not chat parameters (the vendor batch's lines show the bodies sent).
    const sent = [...w.A.batch.files.values()].filter((f) => f.purpose === "batch" && f.text.includes("B7 p"))
      .flatMap((f) => f.text.split("\n").filter(Boolean).map((l) => JSON.parse(l).body));
    expect(sent).toHaveLength(6);
    expect(sent.every((b) => b.mode === undefined && b.completion_window === undefined)).toBe(true);
  }, 60_000);
});
