// One ioredis client for each way of reaching Redis (CONTRACT §2): a URL, Sentinels that name the
// current master, or a Cluster's seed nodes. Every mode gets the same outage behaviour (CONTRACT
// §7): a command waits about COMMAND_TIMEOUT_MS at most (the reply watchdog on a single
// connection, ioredis' commandTimeout on each Cluster node), fails at once while there is no
// connection (no offline queue), and the client reconnects every few hundred ms.
import Redis, { Cluster, type RedisOptions } from "ioredis";
import type { RedisTarget } from "../../config.ts";

/** Longest a Redis command may take before it fails (a frozen or unreachable Redis). */
export const COMMAND_TIMEOUT_MS = 500;

const retry = (attempt: number) => Math.min(50 * attempt, 500);

/**
 * A demoted master answers writes with READONLY (a failover the client has not seen yet, or
 * REDIS_URL naming a node that is now a replica): the command fails like any outage (503
 * budget_unavailable for budgeted requests) and the connection is dropped, so the next one goes
 * to whoever is master now (Sentinel mode asks the Sentinels again). Not resent: the caller
 * decides, and every money script is idempotent by request id anyway.
 */
const reconnectOnError = (err: Error) => (/^READONLY\b/.test(err.message) ? 1 : false);

/**
 * `commands`: the money path's connection. `subscriber`: pub/sub, which waits for a connection
 * rather than failing; the /blitz job queue's BullMQ connections take the same options (BullMQ
 * needs `maxRetriesPerRequest: null` and an offline queue for its blocking commands).
 */
export type Role = "commands" | "subscriber";

function nodeOptions(role: Role): RedisOptions {
  return role === "commands"
    ? {
        connectTimeout: 1000,
        maxRetriesPerRequest: 0,
        enableAutoPipelining: true,
        reconnectOnError,
      }
    : { connectTimeout: 1000, maxRetriesPerRequest: null, reconnectOnError };
}

/**
 * The client for `target`. A Cluster client is returned under Redis's type: both carry the same
 * command methods, `defineCommand`, `status` and events, which is all the gateway uses; ioredis
 * routes each command and script by its first key's slot and follows MOVED and ASK.
 */
export function connectRedis(target: RedisTarget, role: Role): Redis {
  const node = nodeOptions(role);
  const offline = { enableOfflineQueue: role === "subscriber" };
  if (target.mode === "url") return new Redis(target.url, { ...node, ...offline, retryStrategy: retry, lazyConnect: false });
  if (target.mode === "sentinel") {
    return new Redis({
      ...node,
      ...offline,
      sentinels: target.sentinels,
      name: target.name,
      password: target.password,
      role: "master",
      retryStrategy: retry,
      sentinelRetryStrategy: retry,
      // No `failoverDetector`: its disconnect on +switch-master can land while a reconnect is
      // resolving the master, and the client then stayed closed for good (seen under load). A
      // dead master is followed by the reconnects above; a live one that Sentinel demotes drops
      // its clients (Sentinel kills their connections) or answers READONLY (reconnectOnError).
    });
  }
  const cluster = new Cluster(target.nodes, {
    ...offline,
    // Auto-pipelining off on a Cluster: a batch that meets a MOVED for one of its commands (a slot
    // moved between nodes) surfaced the redirection as an error instead of following it.
    redisOptions: { ...node, commandTimeout: role === "commands" ? COMMAND_TIMEOUT_MS : undefined, enableAutoPipelining: false, password: target.password },
    clusterRetryStrategy: retry,
    scaleReads: "master",
    enableAutoPipelining: false,
    slotsRefreshTimeout: 1000,
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 100,
    retryDelayOnTryAgain: 100,
  });
  return cluster as unknown as Redis;
}

/** The address to show for `target` (never its password). */
export function describeRedis(target: RedisTarget): string {
  const list = (l: Array<{ host: string; port: number }>) => l.map((n) => (n.host.includes(":") ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`)).join(",");
  if (target.mode === "url") return target.url.replace(/\/\/[^@/]*@/, "//");
  if (target.mode === "sentinel") return `sentinel ${target.name} via ${list(target.sentinels)}`;
  return `cluster ${list(target.nodes)}`;
}

/**
 * Whether the connection can take writes now: a ready connection to a node that is master (a
 * replica answers PING but refuses every write). For a Cluster, every master it knows answers.
 */
export async function writable(r: Redis): Promise<boolean> {
  if (r.status !== "ready") return false;
  const nodes = (r as unknown) instanceof Cluster ? (r as unknown as Cluster).nodes("master") : [r];
  if (!nodes.length) return false;
  const roles = await Promise.all(nodes.map((n) => n.call("ROLE") as Promise<unknown[]>));
  return roles.every((x) => Array.isArray(x) && x[0] === "master");
}
