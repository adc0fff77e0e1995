// /blitz jobs: the account's jobs (GET /v1/organizations/blitz-jobs), newest first, each with its
// status, progress (done of total, and how the finished items ended) and cost so far. While a job
// is queued or running the view reloads itself every few seconds.
import { api } from "../api.js";
import { fmt, h, table } from "../dom.js";

const ACTIVE = new Set(["queued", "running"]);
const REFRESH_MS = 5000;
let timer = null;

const statusBadge = (s) => h("span", { className: `badge ${s === "completed" ? "ok" : s === "failed" || s === "cancelled" ? "bad" : ""}` }, s);

function outcomes(p) {
  const parts = [[p.succeeded, "succeeded"], [p.failed, "failed"], [p.not_run, "not run"], [p.interrupted, "interrupted"]].filter(([n]) => n > 0);
  return parts.length ? parts.map(([n, what]) => `${fmt.int(n)} ${what}`).join(", ") : "—";
}

function row(j) {
  const done = j.progress.done;
  return h("tr", { dataset: { job: j.id, status: j.status } },
    h("td", {}, h("code", {}, j.id)),
    h("td", {}, j.routing_key_label ?? j.routing_key_id),
    h("td", { dataset: { figure: "status" } }, statusBadge(j.status), j.stop_reason ? h("small", { className: "muted" }, ` ${j.stop_reason}`) : null),
    h("td", { className: "num", dataset: { figure: "progress" } },
      h("progress", { max: j.total, value: done, ariaLabel: `${done} of ${j.total} prompts done` }), " ", `${fmt.int(done)} / ${fmt.int(j.total)}`),
    h("td", { dataset: { figure: "outcomes" } }, outcomes(j.progress)),
    h("td", { className: "num", dataset: { figure: "cost_usd" } }, fmt.usd(j.cost_usd)),
    h("td", {}, fmt.time(j.created_at)),
    h("td", {}, fmt.time(j.finished_at)));
}

export async function renderJobs({ root, refresh }) {
  clearTimeout(timer);
  const { jobs } = await api("/v1/organizations/blitz-jobs", { query: { limit: 100 } });
  const num = (label) => ({ label, num: true });
  root.append(h("h2", {}, "Blitz jobs"),
    h("p", { className: "muted legend" }, "Jobs submitted with POST /blitz/jobs by any of this account's routing keys, newest first. Progress counts prompts in a final state; cost is what the prompts that ran were charged so far."),
    jobs.length === 0 ? h("p", { className: "muted", id: "no-jobs" }, "No jobs (finished jobs are listed until their results expire).") :
      table(["Job", "Key", "Status", num("Progress"), "Outcomes", num("Cost"), "Created", "Finished"], jobs.map(row), { id: "jobs-table" }));
  if (jobs.some((j) => ACTIVE.has(j.status))) {
    timer = setTimeout(() => { if (location.hash === "#jobs") refresh(); }, REFRESH_MS);
  }
}
