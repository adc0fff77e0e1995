// Budget alerts: the account's thresholds (percent of each routing key's monthly budget) and where
// an alert goes (webhook URL, email), from GET /v1/organizations/budget-alerts. With an sk_ token
// they can be saved (POST) or turned off (DELETE); the API refuses rk_ writes, so an rk_ token
// sees them read-only. The form does no validation of its own: the API judges every value and
// its 400 sentence is what the operator reads.
import { api, canWrite } from "../api.js";
import { fmt, h } from "../dom.js";

const PATH = "/v1/organizations/budget-alerts";

/** "50, 80 100" → [50, 80, 100]; anything that is not a number goes through as sent (the API names it). */
function parseThresholds(text) {
  return text.split(/[\s,;]+/).filter(Boolean).map((t) => (/^-?\d+(\.\d+)?$/.test(t) ? Number(t) : t));
}

function facts(a) {
  return h("dl", { className: "facts", id: "alert-settings" },
    h("dt", {}, "Thresholds"), h("dd", { dataset: { field: "thresholds" } }, a ? a.thresholds_percent.map((p) => `${p} %`).join(", ") : "off"),
    h("dt", {}, "Webhook URL"), h("dd", { dataset: { field: "webhook_url" } }, a?.webhook_url ?? "—"),
    h("dt", {}, "Email"), h("dd", { dataset: { field: "email" } }, a?.email ?? "—"),
    h("dt", {}, "Updated"), h("dd", {}, fmt.time(a?.updated_at)));
}

function editForm(a, { notify, refresh }) {
  const thresholds = h("input", { name: "thresholds_percent", inputMode: "numeric", placeholder: "50, 80, 100", value: a ? a.thresholds_percent.join(", ") : "" });
  // Text areas, not inputs: a long URL or address wraps inside the box on a phone instead of scrolling sideways within it.
  const url = h("textarea", { name: "webhook_url", rows: 1, spellcheck: false, placeholder: "https://… (empty = none)", value: a?.webhook_url ?? "" });
  const email = h("textarea", { name: "email", rows: 1, spellcheck: false, inputMode: "email", placeholder: "ops@example.com (empty = none)", value: a?.email ?? "" });
  const act = async (fn) => {
    try {
      await fn();
      await refresh();
      notify("Saved.", "ok");
    } catch (e) {
      notify(e.message, "error");
    }
  };
  const form = h("form", { id: "alerts-form", className: "alerts-form", noValidate: true, on: { submit: (ev) => {
    ev.preventDefault();
    const body = { thresholds_percent: parseThresholds(thresholds.value), webhook_url: url.value.trim() || null, email: email.value.trim() || null };
    act(() => api(PATH, { method: "POST", body }));
  } } },
    h("label", {}, "Thresholds (% of each key's monthly budget)", thresholds),
    h("label", {}, "Webhook URL", url),
    h("label", {}, "Email", email),
    h("div", { className: "inline-form" },
      h("button", { type: "submit" }, "Save alerts"),
      a ? h("button", { type: "button", className: "danger", id: "alerts-off", on: { click: () => act(() => api(PATH, { method: "DELETE" })) } }, "Turn alerts off") : null));
  return h("div", { className: "panel" }, h("h3", {}, "Change"), form);
}

export async function renderAlerts(ctx) {
  const { root, me } = ctx;
  const { budget_alerts: a } = await api(PATH);
  root.append(h("h2", {}, "Budget alerts"),
    h("p", { className: "muted legend" }, "For every routing key with a monthly budget, each threshold fires once per key and calendar month (UTC) when the key's month spend reaches it: a signed budget.threshold_reached webhook and/or a mail."),
    h("div", { className: "panel" }, facts(a)));
  if (canWrite(me)) root.append(editForm(a, ctx));
  else root.append(h("p", { className: "muted", id: "alerts-read-only" }, "Read-only token: sign in with an sk_ token to change the alerts."));
}
