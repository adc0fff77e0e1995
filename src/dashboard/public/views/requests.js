// Recent requests: the latest usage records (one per attempt), filtered by key, lane and outcome,
// each with the lanes its request tried, tokens, cost, latency and time to first byte.
import { api } from "../api.js";
import { clear, fmt, h, labelCells, table } from "../dom.js";

const OUTCOMES = ["ok", "error", "aborted", "broken", "interrupted", "cache_hit"];
/** Outcomes that are answers, not failures. */
const SERVED = new Set(["ok", "cache_hit"]);
const filters = { key: "", provider: "", outcome: "" };
const num = (label) => ({ label, num: true });
const COLUMNS = ["Time", "Key", "Lanes tried", "Model", "Outcome", num("Tokens in / out"), num("Cost"), num("Latency"), num("TTFB")];

function select(name, label, options, labelOf = (o) => o) {
  const s = h("select", { name, id: `filter-${name}` }, h("option", { value: "" }, `any ${label}`),
    options.map((o) => h("option", { value: o, selected: filters[name] === o }, labelOf(o))));
  return h("label", {}, `${label} `, s);
}

function row(r, keyNames) {
  return h("tr", { dataset: { record: String(r.id) }, className: SERVED.has(r.outcome) ? "" : "failed" },
    h("td", {}, fmt.time(r.created_at)),
    h("td", {}, keyNames.get(r.routing_key_id) ?? r.routing_key_id ?? "—"),
    h("td", {}, r.lanes_tried.join(" → ")),
    h("td", {}, r.model ?? "—"),
    h("td", {}, h("span", { className: `badge ${SERVED.has(r.outcome) ? "ok" : "bad"}` }, r.outcome), " ", String(r.status), r.error_code ? h("small", { className: "muted" }, ` ${r.error_code}`) : null),
    h("td", { className: "num" }, `${fmt.int(r.prompt_tokens)} / ${fmt.int(r.completion_tokens)}`),
    h("td", { className: "num", dataset: { figure: "cost_usd" } }, fmt.usd(r.cost_usd),
      r.price_estimated ? [" ", h("abbr", { className: "est", title: "Estimated: the model is not in the pricing catalog, so a fallback price was used" }, "est.")] : null,
      r.seat ? [" ", h("span", { className: "badge" }, "seat")] : null),
    h("td", { className: "num" }, fmt.ms(r.latency_ms)),
    h("td", { className: "num" }, fmt.ms(r.ttfb_ms)));
}

export async function renderRequests({ root, notify }) {
  const [keys, lanes] = await Promise.all([
    api("/v1/organizations/routing-keys"),
    api("/v1/organizations/usage/groups", { query: { by: "lane" } }),
  ]);
  const keyNames = new Map(keys.routing_keys.map((k) => [k.id, k.label]));
  const form = h("form", { className: "inline-form filters", id: "filters" },
    select("key", "key", keys.routing_keys.map((k) => k.id), (id) => keyNames.get(id)),
    // Lanes this account's records name (a refusal's group has none), so `sub` appears only with seat traffic.
    select("provider", "lane", [...new Set(lanes.groups.map((g) => g.provider).filter((p) => p !== null))].sort()),
    select("outcome", "outcome", OUTCOMES));
  const body = h("div", { id: "records" });
  const more = h("button", { type: "button", hidden: true }, "Older records");
  let before = null;

  const load = async (reset) => {
    if (reset) { clear(body); before = null; }
    const page = await api("/v1/organizations/usage/records", { query: { limit: 50, ...filters, before } });
    const rows = page.records.map((r) => labelCells(row(r, keyNames), COLUMNS));
    const tbody = body.querySelector("tbody");
    if (tbody) tbody.append(...rows);
    else body.append(page.records.length === 0 ? h("p", { className: "muted" }, "No records match.") :
      table(COLUMNS, rows, { id: "records-table" }));
    before = page.next_before;
    more.hidden = before === null;
  };
  const failed = (e) => notify(e.message, "error");
  form.addEventListener("change", (ev) => { filters[ev.target.name] = ev.target.value; load(true).catch(failed); });
  more.addEventListener("click", () => load(false).catch(failed));
  root.append(h("h2", {}, "Recent requests"), form, body, more);
  await load(true);
}
