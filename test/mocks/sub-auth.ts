// A mock of the subscription's OAuth server: a real Bun HTTP server on loopback that tests point
// the gateway at (SUB_AUTH_BASE_URL = mock.url). It serves the refresh grant the subscription CLI
// uses: `POST /oauth/token` with a JSON body
//   {client_id, grant_type: "refresh_token", refresh_token, scope: "openid profile email"}
// answering `{id_token, access_token, refresh_token}`. Refresh tokens rotate: each one works
// once, and a reused one answers 401 `refresh_token_reused` like the real server, so a gateway
// that refreshed twice for the same sign-in would break the sign-in (what the single-flight test
// guards against). New access tokens are JWT-shaped with an `exp` and are allowed on the mock
// backend passed in.
import type { MockSubBackend } from "./sub-backend.ts";
import { headersOf, json, serveLoopback, sleep } from "./scaffold.ts";

export interface TokenRequestRecord {
  headers: Record<string, string>;
  body: any;
}

export interface MockSubAuth {
  url: string;
  /** Refresh grants answered with new tokens. */
  readonly refreshes: number;
  /** Every POST /oauth/token received, in order. */
  requests: TokenRequestRecord[];
  /** Makes `refreshToken` valid for one refresh of `accountId`'s sign-in. */
  register(refreshToken: string, accountId: string): void;
  /** Delay before answering (lets concurrent requests pile up behind one refresh). */
  setLatency(ms: number): void;
  /** Answers every refresh with this status (null = normal). */
  setFail(status: number | null): void;
  /** Lifetime of issued access tokens (default 3600 s). */
  setTtl(seconds: number): void;
  /** The newest tokens issued for an account. */
  latest(accountId: string): { access_token: string; refresh_token: string } | undefined;
  stop(): Promise<void>;
}

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
let seq = 0;

/** A JWT-shaped access token (unsigned; the gateway only reads `exp`) for `accountId`. */
export function makeAccessToken(accountId: string, expiresInSeconds: number): string {
  const payload = {
    exp: Math.floor(Date.now() / 1000) + expiresInSeconds,
    iat: Math.floor(Date.now() / 1000),
    jti: `${Date.now().toString(36)}${(++seq).toString(36)}${Math.random().toString(36).slice(2, 8)}`,
    "https://api.openai.com/auth": { chatgpt_account_id: accountId },
  };
  return `${b64({ alg: "RS256", typ: "JWT" })}.${b64(payload)}.${Buffer.from("mock-signature").toString("base64url")}`;
}

/** A subscription CLI sign-in file for `accountId` whose tokens the mocks accept. */
export function makeAuthJson(opts: {
  backend?: MockSubBackend;
  auth?: MockSubAuth;
  accountId?: string;
  /** Seconds until the access token expires; negative = already expired. */
  accessTtl?: number;
}) {
  const accountId = opts.accountId ?? `acc-${Math.random().toString(36).slice(2, 10)}`;
  const access = makeAccessToken(accountId, opts.accessTtl ?? 3600);
  const refresh = `rt_${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
  opts.backend?.allow(access, accountId);
  opts.auth?.register(refresh, accountId);
  return {
    accountId,
    authJson: {
      OPENAI_API_KEY: null,
      tokens: { id_token: makeAccessToken(accountId, 3600), access_token: access, refresh_token: refresh, account_id: accountId },
      last_refresh: new Date().toISOString(),
    },
  };
}

export async function startMockSubAuth(opts: { backend?: MockSubBackend } = {}): Promise<MockSubAuth> {
  const refreshTokens = new Map<string, string>(); // refresh token → account id
  const used = new Set<string>();
  const latestByAccount = new Map<string, { access_token: string; refresh_token: string }>();
  const requests: TokenRequestRecord[] = [];
  let refreshes = 0;
  let latency = 0;
  let fail: number | null = null;
  let ttl = 3600;

  const server = serveLoopback({
    async fetch(req) {
      const url = new URL(req.url);
      if (req.method !== "POST" || url.pathname !== "/oauth/token") return json({ error: "not_found" }, 404);
      const headers = headersOf(req);
      let body: any = null;
      try { body = await req.json(); } catch {}
      requests.push({ headers, body });
      if (latency) await sleep(latency);
      if (fail !== null) return json({ error: { message: `Mock auth server failing with ${fail}.`, code: null } }, fail);
      if (body?.grant_type !== "refresh_token" || typeof body.refresh_token !== "string" || typeof body.client_id !== "string") {
        return json({ error: "invalid_request", error_description: "grant_type, refresh_token and client_id are required." }, 400);
      }
      const rt = body.refresh_token as string;
      if (used.has(rt)) {
        return json({ error: { message: "Your refresh token has already been used to generate a new access token. Please try signing in again.", type: "invalid_request_error", code: "refresh_token_reused" } }, 401);
      }
      const accountId = refreshTokens.get(rt);
      if (accountId === undefined) {
        return json({ error: { message: "Could not validate your refresh token. Please try signing in again.", type: "invalid_request_error", code: "refresh_token_invalidated" } }, 401);
      }
      used.add(rt);
      refreshTokens.delete(rt);
      refreshes++;
      const access = makeAccessToken(accountId, ttl);
      const refresh = `rt_${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
      refreshTokens.set(refresh, accountId);
      opts.backend?.allow(access, accountId);
      latestByAccount.set(accountId, { access_token: access, refresh_token: refresh });
      return json({ id_token: makeAccessToken(accountId, ttl), access_token: access, refresh_token: refresh, expires_in: ttl, token_type: "Bearer" });
    },
  });

  return {
    url: server.origin,
    get refreshes() { return refreshes; },
    requests,
    register(refreshToken, accountId) { refreshTokens.set(refreshToken, accountId); },
    setLatency(ms) { latency = ms; },
    setFail(status) { fail = status; },
    setTtl(seconds) { ttl = seconds; },
    latest(accountId) { return latestByAccount.get(accountId); },
    stop: server.stop,
  };
}
