// Per-gateway state of the sub lanes: decrypted sign-ins cached briefly (no database read per
// request on a warm session), refreshes in flight (one per session id), and live catalogs.
// Built at boot as `services.subLanes` so several gateways in one process never share it.
import { LRUCache } from "lru-cache";
import type { SubAuthFile } from "./auth-file.ts";

export type Tier = "flagship" | "mini";

export interface CatalogEntry {
  id: string;
  created: number;
  owned_by: string;
  tier?: Tier;
}

export interface SubState {
  /** Session id → decrypted sign-in and when it was read. */
  auth: LRUCache<string, { auth: SubAuthFile; at: number }>;
  /** Session id → the refresh in flight; every request that needs it awaits the same promise. */
  refreshing: Map<string, Promise<SubAuthFile>>;
  /** Session id → live catalog and when it was fetched, or the fetch in flight. */
  catalog: LRUCache<string, { entries: CatalogEntry[]; at: number }>;
  /** Session id → a refresh the auth server refused for good, remembered briefly so a dead sign-in is not retried per request. */
  /** A refused refresh, per session, for the access token whose refresh was refused. */
  refreshRefused: LRUCache<string, { message: string; until: number; stale: string }>;
  /** Session id → the catalog fetch in flight. */
  catalogPending: Map<string, Promise<CatalogEntry[]>>;
}

/** How long a decrypted sign-in is reused before it is read again (a refresh elsewhere shows up by then, or on the next 401). */
export const AUTH_CACHE_MS = 15_000;
/** How long a live catalog is reused (tier aliases resolve against it). */
export const CATALOG_CACHE_MS = 60_000;
/** How long GET /v1/models waits for a live catalog before listing the lane without it. */
export const CATALOG_LIST_WAIT_MS = 3_000;
/** How long a refused refresh is remembered. */
export const REFRESH_REFUSED_MS = 30_000;

export function createSubState(): SubState {
  return { auth: new LRUCache({ max: 10_000 }), refreshing: new Map(), catalog: new LRUCache({ max: 10_000 }), refreshRefused: new LRUCache({ max: 10_000 }), catalogPending: new Map() };
}
