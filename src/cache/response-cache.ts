// The response cache at the edge of the relay (docs/caching.md). handleInference hands a request
// of a key with `cache` here, with the rest of the pipeline as `relay`; a key without one never
// comes here. A hit answers from the entry: no admission (no reservation, no rate limit), $0,
// one `cache_hit` usage record with the cost it saved. A miss runs the relay and keeps the
// answer if it is complete. Concurrent identical misses go upstream once: followers in this
// process wait for their leader; in Redis mode a lock (SET NX PX) makes one instance the leader
// and the others poll for its entry, taking over if it gives up. Waits are bounded; a follower
// whose wait fails goes upstream itself. Nothing here can turn a request into an error: a store
// that fails is a miss.
import type { AccessEntry } from "../http/access-log.ts";
import type { RequestContext } from "../http/request-context.ts";
import type { ClientShape, Json, Usage } from "../protocols/types.ts";
import type { KeyContext } from "../relay/key-context.ts";
import type { UsageRow } from "../relay/usage-queue.ts";
import { SSE_HEADERS } from "../relay/stream/sse-headers.ts";
import { CACHE_SAVED_HEADER, COST_HEADER, usdText } from "../relay/cost-headers.ts";
import { captureJson, isComplete, replayJson, replaySse, StreamRecorder, type CachedAnswer, type Captured } from "./answer.ts";
import { cacheableRequest, cacheControlOf, type CacheControl } from "./control.ts";
import { canonicalJson, entryKey, IGNORED_FIELDS, routeDigest, type CacheScope } from "./key.ts";
import { ReplayTemplates } from "./replay-template.ts";
import type { CacheStore } from "./store.ts";

/** What the cache reads of an admitted request's money (money/money.ts's MoneyCall): whether its output limit was lowered. */
export interface AdmittedMoney {
  readonly outputLimit: number | null;
}

/** The rest of the pipeline; `admitted` hands back the request's money once it is admitted. */
export type Relay = (admitted: (money: AdmittedMoney) => void) => Promise<Response>;

export interface ResponseCacheDeps {
  store: CacheStore;
  /** Largest entry kept, in bytes (RESPONSE_CACHE_MAX_ENTRY_KB). */
  maxEntryBytes: number;
  /** Memory for the hits' pre-encoded bytes (replay-template.ts). */
  templateBytes: number;
  /** How long a follower waits for its leader's answer before going upstream itself. */
  waitMs: number;
  instanceId: string;
  /** Writes a usage record (the ledger's usage stream in Redis mode, else the usage queue). */
  record(row: UsageRow): void;
}

/** How often an instance waiting on another's lock looks for the entry (and whether the lock is gone). */
const POLL_MS = 50;

/** One leader's request in this process, its followers waiting on `answer`. */
interface Flight {
  answer: Promise<CachedAnswer | null>;
  finish(a: CachedAnswer | null): void;
}

interface Request {
  rc: RequestContext;
  key: KeyContext;
  shape: ClientShape;
  endpoint: string;
  body: Json;
  stream: boolean;
  startedAt: number;
  /** The request's tags (CONTRACT §9), on its hit's record. */
  tags: string[] | null;
}

/** A /blitz prompt's place in the cache: its entry key, and its entry when one was fresh enough. */
export interface PromptEntry {
  k: string;
  a: CachedAnswer | null;
}

let seq = 0;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class ResponseCache {
  private flights = new Map<string, Flight>();
  private templates: ReplayTemplates;
  constructor(private deps: ResponseCacheDeps) {
    this.templates = new ReplayTemplates(deps.templateBytes);
  }

  async serve(rc: RequestContext, key: KeyContext, shape: ClientShape, endpoint: string, parsed: { body: Json; stream: boolean; tags?: string[] | null }, relay: Relay): Promise<Response> {
    const req: Request = { rc, key, shape, endpoint, body: parsed.body, stream: parsed.stream, startedAt: performance.now(), tags: parsed.tags ?? null };
    const cc = cacheControlOf(rc.request.headers.get("cache-control"));
    if (cc.noStore || !cacheableRequest(shape, req.body)) return this.run(req, relay, "BYPASS", null);
    const k = entryKey(scopeOf(key), endpoint, req.body);
    if (cc.noCache) return this.run(req, relay, "BYPASS", { k, flight: null, owner: null });
    const maxAge = Math.min(key.cache!.ttlSeconds, cc.maxAge ?? Infinity);
    const found = await this.read(k, maxAge);
    if (found) return this.hit(req, found, k);

    const running = this.flights.get(k);
    if (running) {
      const a = await this.waitLocal(running, rc.request.signal);
      if (a && ageOf(a) <= maxAge) return this.hit(req, a, k);
      return this.run(req, relay, "MISS", { k, flight: null, owner: null });
    }
    let finish!: (a: CachedAnswer | null) => void;
    const flight: Flight = { answer: new Promise((r) => (finish = r)), finish: (a) => finish(a) };
    this.flights.set(k, flight);
    const owner = `${this.deps.instanceId}.${++seq}`;
    if (this.deps.store.shared && (await this.deps.store.lock(k, owner, this.deps.waitMs)) === false) {
      const a = await this.waitRemote(k, owner, maxAge, rc.request.signal);
      if (a === "lead") return this.run(req, relay, "MISS", { k, flight, owner });
      this.land(k, flight, a);
      if (a) return this.hit(req, a, k);
      return this.run(req, relay, "MISS", { k, flight: null, owner: null });
    }
    return this.run(req, relay, "MISS", { k, flight, owner });
  }

  private async read(k: string, maxAge: number): Promise<CachedAnswer | null> {
    const text = await this.deps.store.get(k);
    if (!text) return null;
    try {
      const a = JSON.parse(text) as CachedAnswer;
      return ageOf(a) <= maxAge ? a : null;
    } catch {
      return null;
    }
  }

  /** A follower in this process: the leader's answer, or null when it failed, took too long or the client left. */
  private waitLocal(f: Flight, signal: AbortSignal): Promise<CachedAnswer | null> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(null), this.deps.waitMs);
      const onAbort = () => done(null);
      const done = (a: CachedAnswer | null) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        resolve(a);
      };
      signal.addEventListener("abort", onAbort);
      f.answer.then(done);
    });
  }

  /** Another instance holds the lock: its entry, "lead" once the lock is free and ours, or null after the wait. */
  private async waitRemote(k: string, owner: string, maxAge: number, signal: AbortSignal): Promise<CachedAnswer | "lead" | null> {
    const until = performance.now() + this.deps.waitMs;
    while (performance.now() < until && !signal.aborted) {
      await sleep(POLL_MS);
      const a = await this.read(k, maxAge);
      if (a) return a;
      const got = await this.deps.store.lock(k, owner, this.deps.waitMs);
      if (got === true) return "lead";
      if (got === null) return null; // the store went away: upstream, no more waiting
    }
    return null;
  }

  /** The flight of `k` ends with `a`: its followers replay it (or go upstream on null). */
  private land(k: string, flight: Flight, a: CachedAnswer | null): void {
    if (this.flights.get(k) === flight) this.flights.delete(k);
    flight.finish(a);
  }

  /** Goes upstream; with `lead`, keeps a complete answer and ends the flight it leads. */
  private async run(req: Request, relay: Relay, label: "MISS" | "BYPASS", lead: { k: string; flight: Flight | null; owner: string | null } | null): Promise<Response> {
    let money: AdmittedMoney | null = null;
    let ended = false;
    const end = async (c: Captured | null) => {
      if (ended || !lead) return;
      ended = true;
      const a = c && money ? await this.keep(req, lead.k, c, money) : null;
      if (lead.owner) await this.deps.store.unlock(lead.k, lead.owner);
      if (lead.flight) this.land(lead.k, lead.flight, a);
    };
    let res: Response;
    try {
      res = await relay((m) => (money = m));
    } catch (e) {
      req.rc.headers = { ...req.rc.headers, "x-cache": label };
      void end(null);
      throw e;
    }
    res.headers.set("x-cache", label);
    if (!lead || res.status !== 200 || !money) {
      void end(null);
      return res;
    }
    if (!req.stream || !res.body || !res.headers.get("content-type")?.startsWith("text/event-stream")) {
      const text = await res.text();
      void end(captureJson(req.shape, req.body, text));
      return new Response(text, { status: res.status, headers: res.headers });
    }
    // The stream goes to the client as it comes; a recorder reads the same bytes beside it.
    const rec = new StreamRecorder(req.shape, req.body, this.deps.maxEntryBytes);
    const reader = res.body.getReader();
    const out = new ReadableStream<Uint8Array>({
      async pull(c) {
        let r: { done: boolean; value?: Uint8Array };
        try {
          r = await reader.read();
        } catch (e) {
          void end(null);
          c.error(e);
          return;
        }
        if (r.done) {
          c.close();
          void end(rec.finish());
          return;
        }
        rec.push(r.value!);
        c.enqueue(r.value!);
      },
      cancel(reason) {
        void end(null);
        return reader.cancel(reason);
      },
    });
    return new Response(out, { status: res.status, headers: res.headers });
  }

  /** Stores a complete answer with what it cost; returns it, or null when it is not kept. */
  private async keep(req: Request, k: string, c: Captured, money: AdmittedMoney): Promise<CachedAnswer | null> {
    const access = req.rc.access;
    // A chat stream whose client did not ask for usage carries none: the attempts' counts stand in.
    const counted = access.inputTokens || access.outputTokens
      ? { prompt_tokens: access.inputTokens, completion_tokens: access.outputTokens, cached_tokens: 0, cache_write_tokens: 0 }
      : null;
    return this.store(req.key, k, req.body, c, { provider: access.served, costUsd: access.costUsd, lowered: money.outputLimit !== null, usage: counted });
  }

  private async store(key: KeyContext, k: string, body: Json, c: Captured, facts: { provider: string | null; costUsd: number; lowered: boolean; usage: Usage | null }): Promise<CachedAnswer | null> {
    if (!isComplete(c, body, facts.lowered)) return null;
    const a: CachedAnswer = { at: Date.now(), provider: facts.provider, model: c.model, costUsd: facts.costUsd, usage: c.usage ?? facts.usage, wire: c.wire };
    const text = JSON.stringify(a);
    if (text.length > this.deps.maxEntryBytes) return null;
    // Not kept (over a quota, Redis full): followers still replay it; the next request goes upstream.
    await this.deps.store.set(k, text, key.cache!.ttlSeconds, key.accountId);
    return a;
  }

  // ---- /blitz prompts: chat bodies answered as JSON outside an HTTP request of their own ----

  /**
   * A prompt's entry key and, when one is fresh enough, its entry. Null when the cache does not
   * apply: the key has none, the request said `no-store`, or the prompt is not cacheable.
   * Prompts share entries with POST /v1/chat/completions (the same body is the same answer).
   */
  async lookupPrompt(key: KeyContext, body: Json, cc: CacheControl): Promise<PromptEntry | null> {
    if (!key.cache || cc.noStore || !cacheableRequest("chat", body)) return null;
    const k = entryKey(scopeOf(key), "chat", body);
    return { k, a: cc.noCache ? null : await this.read(k, Math.min(key.cache.ttlSeconds, cc.maxAge ?? Infinity)) };
  }

  /** A prompt answered from its entry: the chat completion (fresh ids), its $0 cache_hit usage record, and the outcome in the prompt's record. */
  promptHit(key: KeyContext, a: CachedAnswer, body: Json, record: AccessEntry, tags: string[] | null = null): Json {
    const completion = JSON.parse(replayJson("chat", body, a));
    record.outcome = "cache_hit";
    this.recordHit(key, a, record.requestId, "blitz", performance.now() - record.startedAt, tags);
    return completion;
  }

  /** Keeps a prompt's answer (a chat completion) when it is complete; returns the entry. */
  keepPrompt(key: KeyContext, k: string, body: Json, completion: Json, facts: { provider: string; costUsd: number; lowered: boolean; usage: Usage | null }): Promise<CachedAnswer | null> {
    const c = captureJson("chat", body, JSON.stringify(completion));
    return c ? this.store(key, k, body, c, facts) : Promise.resolve(null);
  }

  /** Answers from an entry: the client's protocol and mode, fresh ids, $0, a cache_hit record. */
  private hit(req: Request, a: CachedAnswer, k: string): Response {
    const { rc, key } = req;
    // CONTRACT §9: a hit costs nothing; what it saved is what the answer cost when first bought.
    const headers: Record<string, string> = { "x-cache": "HIT", age: String(ageOf(a)), [COST_HEADER]: "0", [CACHE_SAVED_HEADER]: usdText(a.costUsd) };
    // The bytes depend on the entry, the protocol and mode, and the delivery fields the key
    // leaves out but an answer may echo (stream_options, metadata, user…): one template each.
    const stream = req.stream && req.shape !== "embeddings";
    const tkey = `${k}|${a.at}|${req.shape}|${stream ? "sse" : "json"}|${deliveryFields(req.body)}`;
    const bytes = this.templates.bytes(tkey, () => (stream ? replaySse(req.shape, req.body, a).join("") : replayJson(req.shape, req.body, a)));
    // SSE: every event of the answer, in order and intact, written at once (a cached answer has no pacing to keep).
    const res = stream
      ? new Response(new ReadableStream<Uint8Array>({ start(c) { c.enqueue(bytes); c.close(); } }), { status: 200, headers: { ...SSE_HEADERS, ...headers } })
      : new Response(bytes, { status: 200, headers: { "content-type": "application/json", ...headers } });
    rc.access.outcome = "cache_hit";
    this.recordHit(key, a, rc.requestId, req.endpoint, performance.now() - req.startedAt, req.tags);
    return res;
  }

  /** A hit's usage record: $0, outcome cache_hit, the cost it saved (its metrics come from the request's record). */
  private recordHit(key: KeyContext, a: CachedAnswer, requestId: string, endpoint: string, latencyMs: number, tags: string[] | null): void {
    this.deps.record({
      requestId,
      attempt: 1,
      recordKey: `${this.deps.instanceId}.hit.${++seq}`,
      accountId: key.accountId,
      routingKeyId: key.id,
      endpoint,
      laneIndex: null,
      provider: a.provider ?? "cache",
      model: a.model,
      status: 200,
      outcome: "cache_hit",
      errorCode: null,
      promptTokens: 0,
      completionTokens: 0,
      cachedTokens: 0,
      cacheWriteTokens: 0,
      costUsd: 0,
      savedUsd: a.costUsd,
      priceEstimated: false,
      latencyMs: Math.round(latencyMs),
      ttfbMs: null,
      seat: false,
      tags,
      createdAt: new Date().toISOString(),
    });
  }
}

/** Where a key's entries live, and the route its answers came through. */
const scopeOf = (key: KeyContext): CacheScope => ({ accountId: key.accountId, keyId: key.id, shared: key.cache!.shared, route: routeDigest(key) });

/** The request's fields left out of the entry key (how it is delivered, who asked), canonical. */
function deliveryFields(body: Json): string {
  const kept: Json = {};
  for (const f of IGNORED_FIELDS) if (f !== "stream" && body[f] !== undefined) kept[f] = body[f];
  return canonicalJson(kept);
}

/** Whole seconds since the entry was stored (the `age` header). */
const ageOf = (a: CachedAnswer) => Math.max(0, Math.floor((Date.now() - a.at) / 1000));
