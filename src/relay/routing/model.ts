// Which model a lane is asked for (CONTRACT §8, decided): the request's `model` when the lane
// names none or names the same one; when the lane names a different model, the lane's model is
// used, because a chain mixes vendors and a model name of one vendor is unknown to the next
// (a key [openai gpt-4o, groq llama-3.3-70b] must serve a `gpt-4o` request on its groq lane).
import type { ResolvedLane } from "../../providers/types.ts";

export function laneModel(requestModel: string, lane: ResolvedLane): string {
  return lane.model ? lane.model : requestModel;
}

/**
 * The retry of `fallback_to_default_model`: after the upstream rejected `tried` as unknown,
 * the lane's own model if it has a different one and the lane allows it, else null.
 */
export function defaultModelRetry(tried: string, lane: ResolvedLane): string | null {
  if (!lane.fallback_to_default_model || !lane.model || lane.model === tried) return null;
  return lane.model;
}
