// Per-lane settings of a `sub` lane, applied to the Responses body (SPEC "Lane"): a value set on
// the lane wins over the client's; a lane without it leaves the client's value alone.
import type { Json } from "../../protocols/types.ts";
import type { LaneRow } from "../../store/db/schema/routing.ts";

const asObject = (v: unknown): Json => (v && typeof v === "object" && !Array.isArray(v) ? (v as Json) : {});

export function applySubSettings(body: Json, lane: Pick<LaneRow, "reasoning_effort" | "verbosity" | "service_tier">): void {
  if (lane.reasoning_effort) body.reasoning = { ...asObject(body.reasoning), effort: lane.reasoning_effort };
  if (lane.verbosity) body.text = { ...asObject(body.text), verbosity: lane.verbosity };
  if (lane.service_tier) body.service_tier = lane.service_tier;
}
