// Per-gateway cache of what each bridge lists (models.ts reads and fills it), built at boot as
// `services.bridgeModels` so several gateways in one process never share it.
import { LRUCache } from "lru-cache";

export interface BridgeModelState {
  /** `<bridge id> <base_url>` → the ids it listed (null: the read failed) and when. */
  lists: LRUCache<string, { ids: string[] | null; at: number }>;
  pending: Map<string, Promise<string[] | null>>;
}

export function createBridgeModelState(): BridgeModelState {
  return { lists: new LRUCache({ max: 10_000 }), pending: new Map() };
}
