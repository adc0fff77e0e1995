// Gemini batch mode on the mock upstream (https://ai.google.dev/api/batch-mode), inline requests:
//   POST /v1beta/models/{model}:batchGenerateContent {batch: {display_name, input_config: {requests:
//        {requests: [{request, metadata: {key}}]}}}} → an Operation named batches/{id}, BATCH_STATE_PENDING
//   GET  /v1beta/batches/{id} → PENDING → RUNNING → SUCCEEDED (one step per poll), then done with
//        response.inlinedResponses.inlinedResponses: [{response | error, metadata: {key}}], in input order
//   POST /v1beta/batches/{id}:cancel → BATCH_STATE_CANCELLED at the next poll, nothing answered
// Each request is checked as generateContent checks it (a bad one fails the create with 400) and
// answered as generateContent answers it; one whose text contains `[batch-error]` fails alone.
// Options: `hold` keeps batches RUNNING; `expire` ends them BATCH_STATE_EXPIRED with no responses.
export interface GeminiBatchMock {
  handle(req: Request, url: URL): Promise<Response | null>;
  batches: Map<string, any>;
  setOptions(o: { hold?: boolean; expire?: boolean }): void;
}

export function geminiBatchMock(opts: {
  validate: (req: Request, url: URL, request: any) => void;
  answer: (request: any, model: string) => Record<string, unknown>;
  checkKey: (req: Request) => boolean;
}): GeminiBatchMock {
  const batches = new Map<string, any>();
  let options: { hold?: boolean; expire?: boolean } = {};
  let seq = 0;
  const err = (code: number, status: string, message: string) => Response.json({ error: { code, message, status } }, { status: code });
  const operation = (b: any) => ({
    name: b.name,
    metadata: {
      "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
      model: b.model, displayName: b.displayName, createTime: b.createTime, updateTime: new Date().toISOString(),
      batchStats: { requestCount: String(b.requests.length) }, state: b.state, name: b.name,
    },
    ...(b.done ? { done: true } : {}),
    ...(b.done && b.responses ? { response: { "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput", inlinedResponses: { inlinedResponses: b.responses } } } : {}),
  });
  return {
    batches,
    setOptions(o) { options = { ...o }; },
    async handle(req, url) {
      const create = /^\/v1beta\/models\/([^/:]+):batchGenerateContent$/.exec(url.pathname);
      const one = /^\/v1beta\/batches\/([^/:]+)(:cancel)?$/.exec(url.pathname);
      if (!create && !one) return null;
      if (!opts.checkKey(req)) return err(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers. Please use API Key.");
      if (create && req.method === "POST") {
        const body = (await req.json().catch(() => null)) as any;
        const batch = body?.batch;
        const input = batch?.input_config ?? batch?.inputConfig;
        const requests = input?.requests?.requests;
        if (!Array.isArray(requests) || !requests.length) return err(400, "INVALID_ARGUMENT", "* BatchGenerateContentRequest.batch.input_config: inline requests are required");
        try {
          for (const r of requests) opts.validate(req, url, r.request);
        } catch (e) {
          return err(400, "INVALID_ARGUMENT", e instanceof Error ? e.message : String(e));
        }
        const name = `batches/mock${++seq}`;
        const b = { name, model: `models/${decodeURIComponent(create[1]!)}`, displayName: batch.display_name ?? batch.displayName ?? "", createTime: new Date().toISOString(), state: "BATCH_STATE_PENDING", requests, polls: 0, done: false, responses: null as any[] | null };
        batches.set(name, b);
        return Response.json(operation(b));
      }
      const b = one ? batches.get(`batches/${one[1]}`) : null;
      if (!b) return err(404, "NOT_FOUND", `Requested entity was not found.`);
      if (one![2] && req.method === "POST") {
        if (!b.done) b.state = "BATCH_STATE_CANCELLING";
        return Response.json({});
      }
      if (req.method !== "GET") return err(405, "INVALID_ARGUMENT", "Method not allowed");
      b.polls++;
      if (b.state === "BATCH_STATE_CANCELLING") Object.assign(b, { state: "BATCH_STATE_CANCELLED", done: true });
      else if (b.state === "BATCH_STATE_PENDING") b.state = "BATCH_STATE_RUNNING";
      else if (b.state === "BATCH_STATE_RUNNING" && options.expire) Object.assign(b, { state: "BATCH_STATE_EXPIRED", done: true });
      else if (b.state === "BATCH_STATE_RUNNING" && !options.hold) {
        b.responses = b.requests.map((r: any) => JSON.stringify(r.request?.contents ?? []).includes("[batch-error]")
          ? { error: { code: 500, message: "Internal error encountered.", status: "INTERNAL" }, metadata: r.metadata }
          : { response: opts.answer(r.request, b.model.replace(/^models\//, "")), metadata: r.metadata });
        Object.assign(b, { state: "BATCH_STATE_SUCCEEDED", done: true });
      }
      return Response.json(operation(b));
    },
  };
}
