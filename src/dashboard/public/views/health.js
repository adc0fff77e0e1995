// Lanes' health: bridges (status, last error, last check), the sub session when one exists
// (connected, provisioned, last error, live catalog) and the saved provider keys (provider,
// label, fingerprint).
import { api } from "../api.js";
import { fmt, h, table } from "../dom.js";

const statusBadge = (s) => h("span", { className: `badge ${s === "healthy" || s === "connected" ? "ok" : s === "unknown" || s === "pending" || s === "provisioning" ? "" : "bad"}` }, s);

export async function renderHealth({ root }) {
  const [bridges, sub, creds] = await Promise.all([
    api("/v1/organizations/bridges"),
    api("/v1/organizations/sub-session", { query: { include: "models" } }),
    api("/v1/organizations/credentials"),
  ]);

  root.append(h("h2", {}, "Bridges"),
    bridges.bridges.length === 0 ? h("p", { className: "muted" }, "No bridges registered.") :
      table(["Bridge", "Status", "Last check", "Last error", "Token"], bridges.bridges.map((b) =>
        h("tr", { dataset: { bridge: b.id } }, h("td", {}, b.label, h("br"), h("small", { className: "muted" }, b.base_url)),
          h("td", {}, statusBadge(b.status)), h("td", {}, fmt.time(b.last_health_at)),
          h("td", { className: "wrap" }, b.last_error ?? "—"), h("td", {}, h("code", {}, "••", b.token_fingerprint)))), { id: "bridge-table" }));

  // The sub session only where one was ever connected: an account without one has nothing pending.
  if (sub.id) {
    root.append(h("h2", {}, "Subscription sign-in (sub)"),
      h("dl", { className: "facts", id: "sub-session" },
        h("dt", {}, "Status"), h("dd", {}, statusBadge(sub.status)),
        h("dt", {}, "Connected"), h("dd", {}, sub.connected ? `yes, since ${fmt.time(sub.connected_at)}` : "no"),
        h("dt", {}, "Provisioned"), h("dd", {}, sub.sub_host ? (sub.sub_host.provisioned ? `yes (${sub.sub_host.account_status})` : `no (${sub.sub_host.account_status})`) : "—"),
        h("dt", {}, "Last used"), h("dd", {}, fmt.time(sub.last_used_at)),
        h("dt", {}, "Expires"), h("dd", {}, fmt.time(sub.expires_at)),
        h("dt", {}, "Last error"), h("dd", { className: "wrap" }, sub.last_error ?? "—"),
        h("dt", {}, "Live catalog"), h("dd", {}, sub.models_error ? sub.models_error :
          sub.models?.length ? h("ul", { className: "models" }, sub.models.map((m) => h("li", {}, m.id, m.tier ? h("span", { className: "badge" }, m.tier) : null))) : "—")));
  }

  root.append(h("h2", {}, "Saved provider keys"),
    creds.credentials.length === 0 ? h("p", { className: "muted" }, "No provider keys saved.") :
      table(["Provider", "Label", "Fingerprint", "Saved"], creds.credentials.map((c) =>
        h("tr", { dataset: { credential: c.id } }, h("td", {}, c.provider), h("td", {}, c.label ?? "—"),
          h("td", {}, h("code", {}, "••", c.key_fingerprint)), h("td", {}, fmt.time(c.created_at)))), { id: "credential-table" }));
}
