// What a route handler gets of its request (route.ts builds it for every mounted path).
import type { AccessEntry } from "./access-log.ts";

export interface RequestContext {
  request: Request;
  /** Socket address of the peer (before TRUST_PROXY). */
  socketIp: string | undefined;
  requestId: string;
  /** This request's record (access-log.ts): handlers and the relay write what happened there; the access line, metrics and traces read it at release. */
  access: AccessEntry;
  /** Headers every answer to this request carries, error or not (the rate-limit headers, once admitted). */
  headers?: Record<string, string>;
}
