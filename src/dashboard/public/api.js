// The management API, called with the token from this tab's sessionStorage in the Authorization
// header. The token never goes into a URL, a cookie, persistent storage or the console.
const KEY = "gateway.dashboard.token";

export const session = {
  get: () => sessionStorage.getItem(KEY),
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, body) {
    super(typeof body?.error === "string" ? body.error : `The gateway answered ${status}.`);
    this.status = status;
    this.code = body?.code ?? null;
    this.body = body;
  }
}

export async function api(path, { method = "GET", body, query } = {}) {
  const token = session.get();
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, String(v));
  const headers = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store", credentials: "omit" });
  let data = null;
  try { data = await res.json(); } catch { /* not JSON */ }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

export const canWrite = (me) => me?.token_scope === "read_write";
