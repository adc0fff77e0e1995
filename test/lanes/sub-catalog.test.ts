// Tier aliases against the live catalog (CONTRACT §4, §8), per-lane settings, and the session
// states that make a sub lane fail over.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { liveCatalog, pickTier, resolveSubModel, tierOf, type CatalogEntry } from "../../src/providers/sub/catalog.ts";
import { applySubSettings } from "../../src/providers/sub/settings.ts";
import { subUnavailable } from "../../src/providers/sub/adapter.ts";
import type { ResolvedLane } from "../../src/providers/types.ts";
import { storesLabel } from "../helpers/gateway.ts";
import { connectSub, startSubWorld, type SubWorld } from "./helpers.ts";

const e = (id: string, tier?: "flagship" | "mini"): CatalogEntry => ({ id, created: 0, owned_by: "sub", ...(tier ? { tier } : {}) });

describe("tier rules (pure)", () => {
  test("tier aliases: flagship, mini, sub/flagship, sub/mini; anything else names a model", () => {
    expect(tierOf("flagship")).toBe("flagship");
    expect(tierOf("sub/flagship")).toBe("flagship");
    expect(tierOf("mini")).toBe("mini");
    expect(tierOf("sub/mini")).toBe("mini");
    expect(tierOf("gpt-5")).toBeNull();
    expect(tierOf("Flagship")).toBeNull();
    for (const name of ["constructor", "toString", "__proto__"]) expect(tierOf(name)).toBeNull(); // never the prototype
  });

  test("tier by name: flagship = first id without 'mini', mini = first id containing it", () => {
    const list = [e("gpt-5-mini"), e("gpt-5.1-codex"), e("gpt-5"), e("o4-mini")];
    expect(pickTier(list, "flagship")).toBe("gpt-5.1-codex");
    expect(pickTier(list, "mini")).toBe("gpt-5-mini");
  });

  test("a catalog entry tagged with tier wins over the name rule", () => {
    const list = [e("gpt-5.1-codex"), e("gpt-5-mini"), e("gpt-5.2", "flagship"), e("tiny-model", "mini")];
    expect(pickTier(list, "flagship")).toBe("gpt-5.2");
    expect(pickTier(list, "mini")).toBe("tiny-model");
  });

  test("a catalog without a model of the tier resolves to nothing", () => {
    expect(pickTier([e("gpt-5")], "mini")).toBeNull();
    expect(pickTier([e("gpt-5-mini")], "flagship")).toBeNull();
  });
});

describe("per-lane settings on the Responses body", () => {
  const lane = (s: Partial<Record<"reasoning_effort" | "verbosity" | "service_tier", string | null>>) =>
    ({ reasoning_effort: null, verbosity: null, service_tier: null, ...s });

  test("reasoning_effort → reasoning.effort, verbosity → text.verbosity, service_tier → service_tier", () => {
    const body: Record<string, any> = { model: "m", input: "x", reasoning: { summary: "auto" }, text: { format: { type: "text" } } };
    applySubSettings(body, lane({ reasoning_effort: "high", verbosity: "low", service_tier: "priority" }));
    expect(body.reasoning).toEqual({ summary: "auto", effort: "high" });
    expect(body.text).toEqual({ format: { type: "text" }, verbosity: "low" });
    expect(body.service_tier).toBe("priority");
  });

  test("reasoning_effort max is sent as the protocol's top effort, xhigh", () => {
    const body: Record<string, any> = { model: "m", input: "x" };
    applySubSettings(body, lane({ reasoning_effort: "max" }));
    expect(body.reasoning).toEqual({ effort: "xhigh" });
  });

  test("a lane without settings leaves the client's values alone", () => {
    const body: Record<string, any> = { model: "m", input: "x", reasoning: { effort: "low" }, service_tier: "default" };
    applySubSettings(body, lane({}));
    expect(body).toEqual({ model: "m", input: "x", reasoning: { effort: "low" }, service_tier: "default" });
  });
});

describe("session states that make a sub lane fail over", () => {
  const lane = (subSession: ResolvedLane["subSession"]) => ({ subSession } as unknown as ResolvedLane);
  const ok = { id: "sub_1", status: "connected", provisioned: true, lastError: null };

  test("connected and provisioned serves", () => {
    expect(subUnavailable(lane(ok))).toBeNull();
  });
  test("no session, revoked, error, expired status and not provisioned each give a reason", () => {
    expect(subUnavailable(lane(null))).toContain("not connected");
    expect(subUnavailable(lane({ ...ok, status: "revoked" }))).toContain("revoked");
    expect(subUnavailable(lane({ ...ok, status: "error", lastError: "backend said no" }))).toContain("backend said no");
    expect(subUnavailable(lane({ ...ok, status: "expired" }))).toContain("expired");
    expect(subUnavailable(lane({ ...ok, provisioned: false, lastError: "The subscription backend refused this sign-in" }))).toContain("refused this sign-in");
  });
  test("a connected session whose expires_at passed is expired", () => {
    const past = { ...ok, expiresAt: new Date(Date.now() - 1000) } as ResolvedLane["subSession"];
    const future = { ...ok, expiresAt: new Date(Date.now() + 60_000) } as ResolvedLane["subSession"];
    expect(subUnavailable(lane(past))).toContain("expired");
    expect(subUnavailable(lane(future))).toBeNull();
  });
});

describe(`live catalog over HTTP (${storesLabel})`, () => {
  let w: SubWorld;
  beforeAll(async () => { w = await startSubWorld(); }, 60_000);
  afterAll(async () => { await w.stop(); }, 60_000);

  test("tier aliases resolve against the live catalog, fetched with the session's tokens", async () => {
    w.backend.setModels(["gpt-5.1-codex-mini", "gpt-5.1-codex", { id: "gpt-5.2", tier: "flagship" }]);
    const { sessionId, subAccountId, authJson } = await connectSub(w);
    const sent = w.backend.received.length;
    expect(await resolveSubModel(w.gw.ctx, sessionId, "flagship")).toBe("gpt-5.2");
    expect(await resolveSubModel(w.gw.ctx, sessionId, "sub/mini")).toBe("gpt-5.1-codex-mini");
    expect(await resolveSubModel(w.gw.ctx, sessionId, "sub/gpt-5.1-codex")).toBe("gpt-5.1-codex");
    expect(await resolveSubModel(w.gw.ctx, sessionId, "gpt-5.1-codex")).toBe("gpt-5.1-codex");
    const fetched = w.backend.received.slice(sent).filter((r) => r.path === "/models");
    expect(fetched.length).toBe(1);
    expect(fetched[0]!.headers.authorization).toBe(`Bearer ${authJson.tokens.access_token}`);
    expect(fetched[0]!.headers["chatgpt-account-id"]).toBe(subAccountId);
  });

  test("the live catalog is cached briefly: a catalog change shows after the cache", async () => {
    w.backend.setModels(["model-a", "model-a-mini"]);
    const { sessionId } = await connectSub(w);
    expect(await resolveSubModel(w.gw.ctx, sessionId, "flagship")).toBe("model-a");
    w.backend.setModels(["model-b", "model-b-mini"]);
    const sent = w.backend.received.length;
    expect(await resolveSubModel(w.gw.ctx, sessionId, "flagship")).toBe("model-a");
    expect(w.backend.received.length).toBe(sent);
    // Age the cache entry past its lifetime: the next resolution reads the new catalog.
    const st = w.gw.ctx.services.subLanes as { catalog: { get(k: string): { at: number } | undefined } };
    st.catalog.get(sessionId)!.at -= 61_000;
    expect(await resolveSubModel(w.gw.ctx, sessionId, "flagship")).toBe("model-b");
    expect(await resolveSubModel(w.gw.ctx, sessionId, "mini")).toBe("model-b-mini");
  });

  test("concurrent resolutions share one catalog fetch", async () => {
    w.backend.setModels(["x-1", "x-1-mini"]);
    const { sessionId } = await connectSub(w);
    const sent = w.backend.received.length;
    const all = await Promise.all(Array.from({ length: 10 }, () => liveCatalog(w.gw.ctx, sessionId)));
    expect(all.every((l) => l.length === 2)).toBe(true);
    expect(w.backend.received.slice(sent).filter((r) => r.path === "/models").length).toBe(1);
  });

  test("a tier the catalog lacks, or a catalog that fails, is a lane failure with a reason", async () => {
    w.backend.setModels(["only-big"]);
    const { sessionId } = await connectSub(w);
    await expect(resolveSubModel(w.gw.ctx, sessionId, "mini")).rejects.toThrow("no mini model");
    const { sessionId: s2 } = await connectSub(w);
    w.backend.setFail(503);
    try {
      await expect(resolveSubModel(w.gw.ctx, s2, "flagship")).rejects.toThrow("answered 503");
    } finally {
      w.backend.setFail(null);
    }
  });
});
