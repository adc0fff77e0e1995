// Lane order for one request. Fallback mode: the key's chain as stored. Classifier mode: the
// classifier service (`ctx.services.classifier`, relay/routing/classifier.ts) puts its pick first.
import type { Ctx } from "../../context.ts";
import type { ChatRequest } from "../../protocols/types.ts";
import type { ResolvedLane } from "../../providers/types.ts";
import type { KeyContext } from "../key-context.ts";

export type Classifier = (ctx: Ctx, key: KeyContext, req: ChatRequest, signal: AbortSignal) => Promise<ResolvedLane[]>;

export function planLanes(ctx: Ctx, key: KeyContext, pivotRequest: ChatRequest, signal: AbortSignal): Promise<ResolvedLane[]> | ResolvedLane[] {
  if (key.mode !== "classifier") return key.lanes;
  return ctx.services.classifier(ctx, key, pivotRequest, signal);
}
