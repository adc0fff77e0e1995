// Shared settings and request builders of the k6 scripts. Everything comes from the environment:
//   GATEWAY_URL   gateway base (default http://127.0.0.1:8080)
//   ROUTING_KEY   a gw_ routing key whose lane points at the upstream under test (required)
//   UPSTREAM_URL  optional: the mock upstream's base (…/v1); adds a DIRECT scenario tagged
//                 target=direct beside the gateway one (tagged target=gateway) for comparison
//   MODEL         model name (default gpt-4o-mini)
//   MOCK          "0" to leave out the `mock` body property (against real vendors); default on
//   VUS, DURATION concurrency and length of each scenario
// The runner (bench/run.ts) measures the same workloads without k6; these scripts are for
// machines where k6 is installed: `k6 run bench/k6/chat.ts -e ROUTING_KEY=gw_…`.
import http, { type RefinedResponse, type ResponseType } from "k6/http";
import { check, fail } from "k6";
import type { Options, Scenario } from "k6/options";

export const GATEWAY = (__ENV.GATEWAY_URL ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
export const UPSTREAM = (__ENV.UPSTREAM_URL ?? "").replace(/\/+$/, "");
export const KEY = __ENV.ROUTING_KEY ?? "";
export const MODEL = __ENV.MODEL ?? "gpt-4o-mini";
export const WITH_MOCK = __ENV.MOCK !== "0";
export const VUS = Number(__ENV.VUS ?? 32);
export const DURATION = __ENV.DURATION ?? "30s";

export type Target = "gateway" | "direct";

export function requireKey(): void {
  if (!KEY) fail("Set ROUTING_KEY (a gw_ routing key whose lanes point at the upstream under test).");
}

/** Number from the environment, or the default. */
export function envNumber(name: string, dflt: number): number {
  const v = __ENV[name];
  return v === undefined || v === "" || !Number.isFinite(Number(v)) ? dflt : Number(v);
}

/** The gateway scenario, plus a direct one against UPSTREAM_URL when it is set. */
export function scenarios(base: Scenario & { exec?: string }, execGateway = "gateway", execDirect = "direct"): Options["scenarios"] {
  const out: Record<string, Scenario> = { gateway: { ...base, exec: execGateway, tags: { target: "gateway" } } as Scenario };
  if (UPSTREAM) out.direct = { ...base, exec: execDirect, tags: { target: "direct" } } as Scenario;
  return out;
}

export function url(target: Target, path: "/chat/completions" | "/responses"): string {
  return target === "gateway" ? `${GATEWAY}/v1${path}` : `${UPSTREAM}${path}`;
}

export function headers(target: Target): Record<string, string> {
  const key = target === "gateway" ? KEY : "sk-bench-direct-0000000000000000";
  return { "content-type": "application/json", authorization: `Bearer ${key}` };
}

export function withMock<T extends Record<string, unknown>>(body: T, mock: Record<string, unknown>): T {
  return WITH_MOCK ? { ...body, mock } : body;
}

export const PROMPT = [{ role: "user", content: "Summarise the last deployment log in one sentence." }];

export function post(target: Target, path: "/chat/completions" | "/responses", body: unknown, name: string): RefinedResponse<ResponseType | undefined> {
  return http.post(url(target, path), JSON.stringify(body), { headers: headers(target), timeout: "120s", tags: { name } });
}

/** Number of SSE events (blank-line separated) in a fully read stream body. */
export function sseEvents(body: string): number {
  return body.split("\n\n").filter((e) => e.trim() !== "").length;
}

export function checkJson(res: RefinedResponse<ResponseType | undefined>, object: string): boolean {
  return check(res, {
    "status is 200": (r) => r.status === 200,
    [`object is ${object}`]: (r) => {
      try {
        return (r.json() as { object?: string }).object === object;
      } catch {
        return false;
      }
    },
  });
}

export function checkStream(res: RefinedResponse<ResponseType | undefined>, doneMarker: string, minEvents: number): boolean {
  const body = typeof res.body === "string" ? res.body : "";
  return check(res, {
    "status is 200": (r) => r.status === 200,
    "content-type is text/event-stream": (r) => (r.headers["Content-Type"] ?? "").includes("text/event-stream"),
    [`stream is complete (${doneMarker})`]: () => body.includes(doneMarker),
    [`at least ${minEvents} events`]: () => sseEvents(body) >= minEvents,
  });
}
