// Which model a lane is asked for (CONTRACT §8): the request's `model` first, always. A lane's
// own `model` is its default: when the upstream rejects the requested model as unknown and the
// lane's `fallback_to_default_model` is true (the default), the same lane retries once with it;
// otherwise the lane counts as failed and the chain moves on. So a key [openai gpt-4o,
// groq llama-3.3-70b] serves a `gpt-4o` request on its groq lane after one unknown-model answer.
import type { ResolvedLane } from "../../providers/types.ts";

export function laneModel(requestModel: string, lane: ResolvedLane): string {
  return requestModel || lane.model || requestModel;
}

/** Every model a lane may be asked for on this request (the budget estimate prices the dearest). */
export function candidateModels(requestModel: string, lane: ResolvedLane): string[] {
  const first = laneModel(requestModel, lane);
  const retry = defaultModelRetry(first, lane);
  return retry ? [first, retry] : [first];
}

/**
 * The retry of `fallback_to_default_model`: after the upstream rejected `tried` as unknown,
 * the lane's own model if it has a different one and the lane allows it, else null.
 */
export function defaultModelRetry(tried: string, lane: ResolvedLane): string | null {
  if (!lane.fallback_to_default_model || !lane.model || lane.model === tried) return null;
  return lane.model;
}
