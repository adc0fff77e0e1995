// Per-lane settings of a `sub` lane, applied to the Responses body (SPEC "Lane"): a value set on
// the lane wins over the client's; a lane without it leaves the client's value alone.
import type { Json } from "../../protocols/types.ts";
import type { LaneRow } from "../../store/db/schema/routing.ts";

/** `max` is the gateway's name for the top effort; the Responses protocol calls it `xhigh`. */
const EFFORT: Record<string, string> = { max: "xhigh" };

const asObject = (v: unknown): Json => (v && typeof v === "object" && !Array.isArray(v) ? (v as Json) : {});

export function applySubSettings(body: Json, lane: Pick<LaneRow, "reasoning_effort" | "verbosity" | "service_tier">): void {
  if (lane.reasoning_effort) body.reasoning = { ...asObject(body.reasoning), effort: EFFORT[lane.reasoning_effort] ?? lane.reasoning_effort };
  if (lane.verbosity) body.text = { ...asObject(body.text), verbosity: lane.verbosity };
  if (lane.service_tier) body.service_tier = lane.service_tier;
}
