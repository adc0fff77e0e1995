// The dashboard shell: sign-in with a pasted account token, the payment page while the account
// is unpaid, and the six views (chosen by the URL fragment, which never carries the token).
import { api, ApiError, session } from "./api.js";
import { clear, fmt, safeHref } from "./dom.js";
import { renderOverview } from "./views/overview.js";
import { renderKeys } from "./views/keys.js";
import { renderHealth } from "./views/health.js";
import { renderRequests } from "./views/requests.js";
import { renderJobs } from "./views/jobs.js";
import { renderAlerts } from "./views/alerts.js";

const VIEWS = { overview: renderOverview, keys: renderKeys, health: renderHealth, requests: renderRequests, jobs: renderJobs, alerts: renderAlerts };
const $ = (id) => document.getElementById(id);
let me = null;
let paymentTimer = null;

function show(id, on) { $(id).hidden = !on; }

export function notify(text, kind = "info") {
  const n = $("notice");
  n.textContent = text;
  n.className = `notice ${kind}`;
  n.hidden = !text;
}

function signedOut(message) {
  session.clear();
  me = null;
  clearInterval(paymentTimer);
  ["nav", "who", "payment", "view"].forEach((id) => show(id, false));
  show("sign-in", true);
  notify(message ?? "", message ? "error" : "info");
  $("token").focus();
}

function showPayment(account) {
  ["nav", "view"].forEach((id) => show(id, false));
  show("payment", true);
  const p = account.payment ?? {};
  $("payment-message").textContent = account.message ?? p.message ?? "";
  $("payment-price").textContent = p.price_usd === undefined ? "—" : `$${p.price_usd} per month`;
  $("payment-deadline").textContent = p.account_expires_at ? fmt.time(p.account_expires_at) : "no deadline";
  $("payment-link").href = safeHref(p.checkout_url);
  $("payment-link").dataset.url = p.checkout_url ?? "";
  clearInterval(paymentTimer);
  paymentTimer = setInterval(() => { start().catch(() => {}); }, 15_000);
}

async function renderView() {
  if (!me || me.plan !== "pro") return;
  const name = VIEWS[location.hash.slice(1)] ? location.hash.slice(1) : "overview";
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.view === name);
  const root = clear($("view"));
  root.dataset.view = name;
  root.setAttribute("aria-busy", "true");
  show("view", true);
  try {
    await VIEWS[name]({ root, me, notify, refresh: renderView });
    notify("");
  } catch (e) {
    if (e instanceof ApiError && (e.status === 401 || e.status === 410)) return signedOut(e.message);
    if (e instanceof ApiError && e.status === 402) return start();
    notify(e.message, "error");
  } finally {
    root.setAttribute("aria-busy", "false");
  }
}

async function start() {
  if (!session.get()) return signedOut();
  try {
    me = await api("/v1/organizations/me");
  } catch (e) {
    return signedOut(e instanceof ApiError ? e.message : "The gateway could not be reached.");
  }
  show("sign-in", false);
  show("who", true);
  $("who-email").textContent = me.email;
  $("who-scope").textContent = me.token_scope === "read_write" ? "sk_ · can act" : "rk_ · read-only";
  if (me.plan !== "pro") return showPayment(me);
  clearInterval(paymentTimer);
  show("payment", false);
  show("nav", true);
  await renderView();
}

$("sign-in-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const t = $("token").value.trim();
  $("token").value = "";
  if (!/^(sk|rk)_[A-Za-z0-9_-]+$/.test(t)) return notify("An account token starts with sk_ or rk_.", "error");
  session.set(t);
  start();
});
$("sign-out").addEventListener("click", () => signedOut());
window.addEventListener("hashchange", () => { renderView(); });
start();
