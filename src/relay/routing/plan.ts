// Lane order for one request. Fallback mode: the key's chain as stored. Classifier mode: the
// classifier service (registered by the lanes module as `ctx.services.classifier`) puts its pick
// first; without it the chain order stands.
import type { Ctx } from "../../context.ts";
import type { ChatRequest } from "../../protocols/types.ts";
import type { ResolvedLane } from "../../providers/types.ts";
import type { KeyContext } from "../key-context.ts";

export type Classifier = (ctx: Ctx, key: KeyContext, req: ChatRequest, signal: AbortSignal) => Promise<ResolvedLane[]>;

export function planLanes(ctx: Ctx, key: KeyContext, pivotRequest: ChatRequest, signal: AbortSignal): Promise<ResolvedLane[]> | ResolvedLane[] {
  if (key.mode !== "classifier") return key.lanes;
  const classifier = ctx.services.classifier as Classifier | undefined;
  return classifier ? classifier(ctx, key, pivotRequest, signal) : key.lanes;
}
