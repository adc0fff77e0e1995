// Keys: every routing key with its lanes in order (each saying whether it is cooling down, and
// until when), budget, spend, remaining and revoked state, and its rate limits when the key carries them. With an sk_ token: create (the raw key is shown
// once, with a copy button), revoke/restore, change the budget, reorder, add or remove lanes.
import { api, canWrite } from "../api.js";
import { append, clear, fmt, h } from "../dom.js";

const LIMITS = [["rpm_limit", "requests/min"], ["tpm_limit", "tokens/min"], ["max_concurrent_requests", "concurrent"]];
const TARGET = { sub: "sub_session_id", bridge: "bridge_instance_id" };
const targetField = (provider) => TARGET[provider] ?? "credential_id";

/** A lane as PATCH takes it: only the fields that carry a value (omitted settings are kept), not its read-only cooldown. */
function laneBody(l) {
  const out = {};
  for (const [k, v] of Object.entries(l)) if (v !== null && v !== undefined && k !== "cooldown_until") out[k] = v;
  return out;
}

/**
 * Whether a lane is cooling down (CONTRACT §9 "Lane cooldowns": it kept failing for a retryable
 * cause, so every instance skips it) and until when, from the lane's `cooldown_until`.
 */
function laneCooldown(l) {
  const until = l.cooldown_until ? Date.parse(l.cooldown_until) : NaN;
  if (!(until > Date.now())) return h("span", { className: "badge ok", dataset: { cooldown: "none" } }, "ready");
  return h("span", { className: "badge warn", dataset: { cooldown: l.cooldown_until }, title: "This lane kept failing for a retryable cause: requests skip it until then." },
    `cooling until ${fmt.time(l.cooldown_until)}`);
}

function laneText(l, names) {
  const target = l[targetField(l.provider)];
  return [l.provider, l.model ? ` · ${l.model}` : "", target ? ` · ${names.get(target) ?? target}` : ""].join("");
}

/** What the account can wire into a lane, as <option>s per provider. */
function wireableNames(lanes) {
  const names = new Map();
  for (const s of lanes.sub_sessions) names.set(s.id, `sub session (${s.status})`);
  for (const b of lanes.bridges) names.set(b.id, `${b.label} (${b.status})`);
  for (const c of lanes.credentials) names.set(c.id, `${c.label ?? c.provider} ••${c.key_fingerprint}`);
  return names;
}

function targetsFor(provider, lanes) {
  if (provider === "sub") return lanes.sub_sessions.map((s) => s.id);
  if (provider === "bridge") return lanes.bridges.map((b) => b.id);
  return lanes.credentials.filter((c) => c.provider === provider).map((c) => c.id);
}

function createForm(ctx) {
  const label = h("input", { name: "label", maxLength: 60, placeholder: "label", required: true });
  const budget = h("input", { name: "monthly_budget_usd", type: "number", min: "0", step: "0.01", placeholder: "monthly budget USD (empty = none)" });
  const out = h("div", { className: "raw-key", id: "raw-key-box", hidden: true });
  const form = h("form", { id: "create-key", className: "inline-form", on: { submit: async (ev) => {
    ev.preventDefault();
    const body = { label: label.value.trim() };
    if (budget.value !== "") body.monthly_budget_usd = Number(budget.value);
    const r = await ctx.act(() => api("/v1/organizations/routing-keys", { method: "POST", body }));
    if (!r) return;
    await ctx.reload();
    showRawKey(ctx.root.querySelector("#raw-key-box"), r.routing_key.label, r.raw_key);
  } } }, label, budget, h("button", { type: "submit" }, "Create key"));
  return h("div", { className: "panel" }, h("h3", {}, "New routing key"), form, out);
}

function showRawKey(box, label, raw) {
  const code = h("code", { id: "raw-key" }, raw);
  const copy = h("button", { type: "button", on: { click: async () => {
    try { await navigator.clipboard.writeText(raw); copy.textContent = "Copied"; } catch { copy.textContent = "Select and copy the key by hand"; }
  } } }, "Copy");
  clear(box).append(h("p", {}, `Key "${label}" created. This is the only time its secret is shown:`), h("div", { className: "copy-row" }, code, copy));
  box.hidden = false;
}

function keyCard(k, ctx) {
  const remaining = k.monthly_budget_usd ? Math.max(0, k.monthly_budget_usd - k.current_month_spend_usd) : null;
  const limits = LIMITS.filter(([f]) => f in k);
  const card = h("article", { className: `card${k.revoked_at ? " revoked" : ""}`, dataset: { key: k.id } },
    h("header", {}, h("h3", { className: "key-label" }, k.label), h("code", {}, k.key_prefix, "…"),
      k.revoked_at ? h("span", { className: "badge bad", dataset: { state: "revoked" } }, `revoked ${fmt.time(k.revoked_at)}`) : h("span", { className: "badge ok", dataset: { state: "active" } }, "active")),
    h("dl", { className: "facts" },
      h("dt", {}, "Budget"), h("dd", { dataset: { field: "budget" } }, k.monthly_budget_usd ? fmt.usd(k.monthly_budget_usd) : "no budget"),
      h("dt", {}, `Spend ${k.current_month}`), h("dd", { dataset: { field: "spend" } }, fmt.usd(k.current_month_spend_usd)),
      h("dt", {}, "Remaining"), h("dd", { dataset: { field: "remaining" } }, remaining === null ? "—" : fmt.usd(remaining)),
      h("dt", {}, "Mode"), h("dd", {}, k.mode),
      h("dt", {}, "Last used"), h("dd", {}, fmt.time(k.last_used_at)),
      limits.map(([f, unit]) => [h("dt", {}, f), h("dd", { dataset: { field: f } }, k[f] === null ? "none" : `${fmt.int(k[f])} ${unit}`)])),
    h("h4", {}, "Lanes, in order"),
    k.providers.length === 0 ? h("p", { className: "muted" }, "No lanes: inference answers 400 no_providers.") :
      h("ol", { className: "lanes" }, k.providers.map((l, i) => h("li", { dataset: { lane: String(i) } }, h("span", {}, laneText(l, ctx.names)), laneCooldown(l)))));
  if (ctx.write) card.append(keyActions(k, ctx));
  return card;
}

function keyActions(k, ctx) {
  const patch = (body) => ctx.act(() => api("/v1/organizations/routing-keys", { method: "PATCH", query: { id: k.id }, body }), true);
  const budget = h("input", { type: "number", min: "0", step: "0.01", name: "budget", value: k.monthly_budget_usd ?? "", placeholder: "USD / month (empty = none)" });
  const budgetForm = h("form", { className: "inline-form budget-form", on: { submit: (ev) => {
    ev.preventDefault();
    patch({ monthly_budget_usd: budget.value === "" ? null : Number(budget.value) });
  } } }, h("label", {}, "Monthly budget ", budget), h("button", { type: "submit" }, "Save budget"));
  const revoke = h("button", { type: "button", className: k.revoked_at ? "" : "danger", dataset: { action: k.revoked_at ? "restore" : "revoke" },
    on: { click: () => patch({ revoked: !k.revoked_at }) } }, k.revoked_at ? "Restore" : "Revoke");
  return h("div", { className: "actions" }, budgetForm, revoke, laneEditor(k, ctx, patch));
}

function laneEditor(k, ctx, patch) {
  let lanes = k.providers.map(laneBody);
  const list = h("ol", { className: "lane-editor" });
  const draw = () => {
    append(clear(list), lanes.map((l, i) => h("li", {},
      h("span", {}, laneText(l, ctx.names)),
      h("button", { type: "button", className: "small", disabled: i === 0, title: "Move up", on: { click: () => { [lanes[i - 1], lanes[i]] = [lanes[i], lanes[i - 1]]; draw(); } } }, "↑"),
      h("button", { type: "button", className: "small", disabled: i === lanes.length - 1, title: "Move down", on: { click: () => { [lanes[i + 1], lanes[i]] = [lanes[i], lanes[i + 1]]; draw(); } } }, "↓"),
      h("button", { type: "button", className: "small", title: "Remove", on: { click: () => { lanes.splice(i, 1); draw(); } } }, "✕"))));
  };
  draw();
  const provider = h("select", { name: "provider" }, ctx.providers.map((p) => h("option", { value: p }, p)));
  const target = h("select", { name: "target" });
  const model = h("input", { name: "model", placeholder: "model (optional)" });
  const fillTargets = () => {
    const ids = targetsFor(provider.value, ctx.wireable);
    append(clear(target), ids.length ? ids.map((id) => h("option", { value: id }, ctx.names.get(id) ?? id)) : h("option", { value: "" }, "nothing to wire — add one first"));
  };
  provider.addEventListener("change", fillTargets);
  fillTargets();
  const add = h("button", { type: "button", on: { click: () => {
    if (lanes.length >= 5) return ctx.notify("A routing key has at most 5 lanes.", "error");
    if (!target.value) return ctx.notify(`Nothing of kind ${provider.value} is connected to this account yet.`, "error");
    const l = { provider: provider.value, [targetField(provider.value)]: target.value };
    if (model.value.trim()) l.model = model.value.trim();
    lanes.push(l);
    draw();
  } } }, "Add lane");
  const save = h("button", { type: "button", on: { click: () => patch({ providers: lanes }) } }, "Save lanes");
  return h("details", { className: "lane-edit" }, h("summary", {}, "Edit lanes"), list, h("div", { className: "inline-form" }, provider, target, model, add), save);
}

export async function renderKeys(ctx) {
  const { root, me } = ctx;
  const data = await api("/v1/organizations/routing-keys", { query: { include: "lanes" } });
  const view = {
    ...ctx,
    write: canWrite(me),
    wireable: data.lanes,
    names: wireableNames(data.lanes),
    // `sub` and `bridge` lanes only when the account has one to wire.
    providers: [...(data.lanes.sub_sessions.length ? ["sub"] : []), ...(data.lanes.bridges.length ? ["bridge"] : []),
      ...[...new Set(data.lanes.credentials.map((c) => c.provider))].sort()],
    reload: () => ctx.refresh(),
    /** Runs a write; on success re-renders (unless told not to), on failure shows the API's sentence. */
    act: async (fn, reload = false) => {
      try {
        const r = await fn();
        if (reload) await ctx.refresh();
        ctx.notify("Saved.", "ok");
        return r;
      } catch (e) {
        ctx.notify(e.message, "error");
        return null;
      }
    },
  };
  root.append(h("h2", {}, "Routing keys"));
  if (!view.write) root.append(h("p", { className: "muted" }, "Read-only token: sign in with an sk_ token to create or change keys."));
  if (view.write) root.append(createForm(view));
  root.append(data.routing_keys.length === 0 ? h("p", { className: "muted", id: "no-keys" }, "No routing keys yet.") :
    h("div", { className: "cards", id: "keys" }, data.routing_keys.map((k) => keyCard(k, view))));
}
