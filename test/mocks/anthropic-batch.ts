// Anthropic's Message Batches on the mock upstream (https://docs.anthropic.com/en/api/creating-message-batches):
//   POST /v1/messages/batches {requests: [{custom_id, params}]} → processing_status in_progress
//   GET  /v1/messages/batches/{id} → in_progress (one poll), then ended with request_counts and results_url
//   GET  /v1/messages/batches/{id}/results → JSONL of {custom_id, result: {type: succeeded|errored|canceled|expired, message | error}}
//   POST /v1/messages/batches/{id}/cancel → canceling, then ended (unprocessed requests canceled)
// A request whose params carry `mock: {status: 500}`, or whose messages contain `[batch-error]`
// (what a gateway that writes its own params can carry), is errored alone (a partial failure).
export interface AnthropicBatchMock {
  handle(req: Request, path: string): Promise<Response | null>;
  batches: Map<string, any>;
  /** `foreignResults`: the ended batch's results_url points at another origin (a vendor answering garbage). */
  setOptions(o: { expire?: boolean; hold?: boolean; foreignResults?: boolean }): void;
}

export function anthropicBatchMock(origin: () => string, answer: (params: any) => Record<string, unknown>, checkKey: (req: Request) => boolean): AnthropicBatchMock {
  const batches = new Map<string, any>();
  let opts: { expire?: boolean; hold?: boolean; foreignResults?: boolean } = {};
  let seq = 0;
  const err = (status: number, type: string, message: string) => Response.json({ type: "error", error: { type, message } }, { status });
  const present = (b: any) => {
    const { requests: _r, results: _s, polls: _p, ...rest } = b;
    return rest;
  };
  function end(b: any, rest: "canceled" | "expired" | null) {
    b.results = b.requests.map((r: any) => {
      if (rest) return { custom_id: r.custom_id, result: { type: rest } };
      if (r.params?.mock?.status >= 400 || JSON.stringify(r.params?.messages ?? []).includes("[batch-error]")) return { custom_id: r.custom_id, result: { type: "errored", error: { type: "error", error: { type: "api_error", message: "Internal server error" } } } };
      return { custom_id: r.custom_id, result: { type: "succeeded", message: answer(r.params) } };
    });
    const c = { processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 0 } as Record<string, number>;
    for (const x of b.results) c[x.result.type]!++;
    b.request_counts = c;
    b.processing_status = "ended";
    b.ended_at = new Date().toISOString();
    b.results_url = opts.foreignResults ? `http://169.254.169.254/v1/messages/batches/${b.id}/results` : `${origin()}/v1/messages/batches/${b.id}/results`;
  }
  return {
    batches,
    setOptions(o) { opts = { ...o }; },
    async handle(req, path) {
      if (!path.startsWith("/v1/messages/batches")) return null;
      if (!checkKey(req)) return err(401, "authentication_error", "invalid x-api-key");
      if (req.method === "POST" && path === "/v1/messages/batches") {
        const body = (await req.json().catch(() => null)) as any;
        if (!body || !Array.isArray(body.requests) || !body.requests.length) return err(400, "invalid_request_error", "requests: Field required");
        const ids = new Set<string>();
        for (const r of body.requests) {
          if (typeof r?.custom_id !== "string" || !/^[a-zA-Z0-9_-]{1,64}$/.test(r.custom_id) || ids.has(r.custom_id)) return err(400, "invalid_request_error", "requests: custom_id must be unique, 1-64 of [a-zA-Z0-9_-]");
          if (!r.params || typeof r.params.model !== "string" || typeof r.params.max_tokens !== "number") return err(400, "invalid_request_error", "requests.params: model and max_tokens are required");
          ids.add(r.custom_id);
        }
        const now = new Date();
        const b = {
          id: `msgbatch_mock${++seq}`, type: "message_batch", processing_status: "in_progress",
          request_counts: { processing: body.requests.length, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
          ended_at: null, created_at: now.toISOString(), expires_at: new Date(now.getTime() + 86_400_000).toISOString(),
          cancel_initiated_at: null, results_url: null, requests: body.requests, results: null, polls: 0,
        };
        batches.set(b.id, b);
        return Response.json(present(b));
      }
      const m = /^\/v1\/messages\/batches\/([^/]+)(\/cancel|\/results)?$/.exec(path);
      const b = m ? batches.get(m[1]!) : null;
      if (!m || !b) return err(404, "not_found_error", `Not found: ${path}`);
      if (req.method === "POST" && m[2] === "/cancel") {
        if (b.processing_status === "in_progress") { b.processing_status = "canceling"; b.cancel_initiated_at = new Date().toISOString(); }
        return Response.json(present(b));
      }
      if (req.method === "GET" && m[2] === "/results") {
        if (b.processing_status !== "ended") return err(400, "invalid_request_error", "The batch is still processing.");
        return new Response(b.results.map((x: any) => JSON.stringify(x)).join("\n") + "\n", { headers: { "content-type": "application/binary" } });
      }
      if (req.method === "GET" && !m[2]) {
        b.polls++;
        if (b.processing_status === "canceling") end(b, "canceled");
        else if (b.processing_status === "in_progress" && b.polls > 1 && !opts.hold) end(b, opts.expire ? "expired" : null);
        return Response.json(present(b));
      }
      return err(405, "invalid_request_error", "Method not allowed");
    },
  };
}
