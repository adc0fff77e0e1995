// Overview: the last 30 days' figures (GET /v1/organizations/usage: client requests, errors,
// upstream attempts, fallbacks, 402/429 refusals, tokens, spend), month-to-date spend against
// budget per routing key, spend per day this month (seat traffic stacked apart when there is
// any), and per lane: requests, attempts, failed attempts, fallbacks and time to first token
// (GET /v1/organizations/usage/groups).
import { api } from "../api.js";
import { append, fmt, h, table } from "../dom.js";

let charts = [];
const currentMonth = () => new Date().toISOString().slice(0, 7);

function tile(name, label, value, text) {
  return h("div", { className: "tile", dataset: { figure: name, value: String(value) } },
    h("span", { className: "tile-label" }, label), h("strong", {}, text));
}

function chart(canvas, config) {
  if (!window.Chart) return; // the page still shows every figure in its tables
  charts.push(new window.Chart(canvas, { ...config, options: { responsive: true, maintainAspectRatio: false, animation: false, ...config.options } }));
}

/** Every day of the month up to today, zero where nothing was recorded. */
function monthDays(month, groups) {
  const byDate = new Map(groups.map((g) => [g.date, g]));
  const [y, m] = month.split("-").map(Number);
  const last = month === currentMonth() ? new Date().getUTCDate() : new Date(Date.UTC(y, m, 0)).getUTCDate();
  const out = [];
  for (let d = 1; d <= last; d++) {
    const date = `${month}-${String(d).padStart(2, "0")}`;
    const g = byDate.get(date);
    out.push({ date, metered: g ? g.cost_usd - g.seat_cost_usd : 0, seat: g ? g.seat_cost_usd : 0 });
  }
  return out;
}

export async function renderOverview({ root }) {
  charts.forEach((c) => c.destroy());
  charts = [];
  const month = currentMonth();
  const [usage, keys, days, lanes, models] = await Promise.all([
    api("/v1/organizations/usage"),
    api("/v1/organizations/routing-keys"),
    api("/v1/organizations/usage/groups", { query: { by: "day", month } }),
    api("/v1/organizations/usage/groups", { query: { by: "lane" } }),
    api("/v1/organizations/usage/groups", { query: { by: "model" } }),
  ]);
  // Models that served tokens but that neither the operator nor the pricing catalog prices (CONTRACT §9).
  const unpriced = models.groups.filter((g) => g.provider !== null && g.model !== null && g.price_source === null && g.prompt_tokens + g.completion_tokens > 0);
  const t = usage.totals;
  // Lanes only: refusals sit in a group without a provider (they reached no lane).
  const laneGroups = lanes.groups.filter((g) => g.provider !== null);
  const seatRequests = laneGroups.reduce((s, g) => s + g.seat_requests, 0);
  const seatCost = laneGroups.reduce((s, g) => s + g.seat_cost_usd, 0);
  const errorRate = t.requests ? t.errors / t.requests : 0;

  append(root, [
    h("h2", {}, "Last 30 days"),
    h("div", { className: "tiles", id: "totals" },
      tile("requests", "Requests", t.requests, fmt.int(t.requests)),
      tile("errors", "Failed requests", t.errors, fmt.int(t.errors)),
      tile("error_rate", "Failed share", errorRate, fmt.pct(errorRate)),
      tile("attempts", "Upstream attempts", t.attempts, fmt.int(t.attempts)),
      tile("fallbacks", "Fallbacks", t.fallbacks, fmt.int(t.fallbacks)),
      tile("budget_refusals", "Refused: budget (402)", t.budget_refusals, fmt.int(t.budget_refusals)),
      tile("rate_limit_refusals", "Refused: rate limit (429)", t.rate_limit_refusals, fmt.int(t.rate_limit_refusals)),
      tile("prompt_tokens", "Prompt tokens", t.prompt_tokens, fmt.int(t.prompt_tokens)),
      tile("completion_tokens", "Completion tokens", t.completion_tokens, fmt.int(t.completion_tokens)),
      tile("cost_usd", "Spend", t.cost_usd, fmt.usd(t.cost_usd)),
      tile("cache_hits", "Cache hits", t.cache_hits ?? 0, fmt.int(t.cache_hits ?? 0)),
      tile("saved_usd", "Saved by cache", t.saved_usd ?? 0, fmt.usd(t.saved_usd ?? 0))),
    h("p", { className: "muted legend" }, "Requests are client requests, each counted once however many lanes it tried; attempts are the calls made upstream, and a fallback is a failed attempt after which the request moved to its next lane. Refused requests (402, 429) reached no lane and are not in Requests."),
    // Seat (sub) figures only where the account has seat traffic.
    seatRequests > 0 || seatCost > 0 ? h("div", { className: "tiles seat", id: "seat" },
      tile("seat_requests", "Seat (sub) requests", seatRequests, fmt.int(seatRequests)),
      tile("seat_cost_usd", "Seat (sub) value", seatCost, fmt.usd(seatCost)),
      h("p", { className: "muted" }, "Subscription-seat traffic is priced for reference; keys with budget_excludes_seats leave it out of their budget.")) : null,
  ]);

  if (unpriced.length) {
    append(root, [
      h("div", { className: "notice", id: "unpriced-models" },
        h("p", {}, "Models used without a price: keys with a budget pay the gateway's conservative fallback price for them, keys without one record $0. The operator can price them (PRICES_FILE or `npm run admin -- prices set`)."),
        table(["Provider", "Model", { label: "Requests", num: true }, { label: "Tokens", num: true }], unpriced.map((g) =>
          h("tr", { dataset: { model: g.model } }, h("td", {}, g.provider), h("td", {}, g.model),
            h("td", { className: "num" }, fmt.int(g.requests)), h("td", { className: "num" }, fmt.int(g.prompt_tokens + g.completion_tokens)))))),
    ]);
  }

  // Month-to-date spend against budget, one bar pair per key.
  const live = keys.routing_keys.filter((k) => !k.revoked_at);
  const budgetCanvas = h("canvas", { id: "budget-chart", ariaLabel: "Month-to-date spend against budget per routing key", role: "img" });
  append(root, [
    h("h2", {}, `Budgets, ${month}`),
    live.length === 0 ? h("p", { className: "muted" }, "No routing keys yet.") : [
      h("div", { className: "chart", dataset: { rows: String(live.length) } }, budgetCanvas),
      table(["Key", { label: "Spend", num: true }, { label: "Budget", num: true }, { label: "Used", num: true }], live.map((k) => {
        const used = k.monthly_budget_usd ? k.current_month_spend_usd / k.monthly_budget_usd : null;
        return h("tr", { dataset: { key: k.id } },
          h("td", {}, k.label), h("td", { className: "num" }, fmt.usd(k.current_month_spend_usd)),
          h("td", { className: "num" }, k.monthly_budget_usd ? fmt.usd(k.monthly_budget_usd) : "no budget"),
          h("td", { className: "num" }, used === null ? "—" : fmt.pct(used)));
      }), { id: "budget-table" }),
    ],
  ]);
  if (live.length) {
    chart(budgetCanvas, {
      type: "bar",
      data: {
        labels: live.map((k) => k.label),
        datasets: [
          { label: "Spend (USD)", data: live.map((k) => k.current_month_spend_usd), backgroundColor: "#2d5be3" },
          { label: "Budget (USD)", data: live.map((k) => k.monthly_budget_usd ?? 0), backgroundColor: "#c9d3ee" },
        ],
      },
      options: { indexAxis: "y", scales: { x: { beginAtZero: true } } },
    });
  }

  const series = monthDays(month, days.groups);
  const dayCanvas = h("canvas", { id: "daily-chart", ariaLabel: "Spend per day this month", role: "img" });
  root.append(h("h2", {}, `Spend per day, ${month}`), h("div", { className: "chart" }, dayCanvas));
  chart(dayCanvas, {
    type: "bar",
    data: {
      labels: series.map((d) => d.date.slice(8)),
      datasets: [
        { label: "Metered (USD)", data: series.map((d) => d.metered), backgroundColor: "#2d5be3", stack: "s" },
        ...(series.some((d) => d.seat > 0) ? [{ label: "Seat / sub (USD)", data: series.map((d) => d.seat), backgroundColor: "#e3a22d", stack: "s" }] : []),
      ],
    },
    options: { scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true } } },
  });

  const n = (x) => ({ label: x, num: true });
  root.append(
    h("h2", {}, "Lanes, last 30 days"),
    laneGroups.length === 0 ? h("p", { className: "muted" }, "No requests recorded in the last 30 days.") :
      table(["Lane", n("Requests"), n("Attempts"), n("Failed attempts"), n("Fallbacks"), n("TTFT p50"), n("TTFT p95"), n("Spend")], laneGroups.map((g) =>
        h("tr", { dataset: { lane: g.provider }, className: g.seat_requests > 0 ? "seat-row" : "" },
          h("td", {}, g.provider, g.seat_requests > 0 ? h("span", { className: "badge" }, "seat") : null),
          h("td", { className: "num", dataset: { figure: "requests" } }, fmt.int(g.requests)),
          h("td", { className: "num", dataset: { figure: "attempts" } }, fmt.int(g.attempts)),
          h("td", { className: "num", dataset: { figure: "failed_attempts" } }, fmt.int(g.failed_attempts)),
          h("td", { className: "num", dataset: { figure: "fallbacks" } }, fmt.int(g.fallbacks)),
          h("td", { className: "num" }, fmt.ms(g.ttfb_p50_ms)),
          h("td", { className: "num" }, fmt.ms(g.ttfb_p95_ms)),
          h("td", { className: "num", dataset: { figure: "cost_usd" } }, fmt.usd(g.cost_usd)))), { id: "lane-table" }),
  );
}
