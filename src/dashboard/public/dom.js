// DOM building without HTML strings: every value becomes a text node or a property, so a label
// like "<img onerror=…>" is shown as those characters and never parsed (no HTML parsing of data anywhere).

/** h("td", {className: "num"}, "12") — props are set as properties, children as nodes/text. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (k === "href") el.href = safeHref(v);
    else el[k] = v;
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(visible(c)));
  }
  return el;
}

/**
 * Text as stored, with invisible format characters (bidi overrides, zero-width spaces: Unicode Cf)
 * spelled out as <U+XXXX>, so a model name sent to the inference API as "\u202Egnp.exe" cannot
 * show as "exe.png". Management refuses them in labels; inference text is stored as sent.
 */
export function visible(value) {
  return String(value).replace(/\p{Cf}/gu, (c) => `<U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}>`);
}

/** Only http(s) links: a `javascript:` URL in data must not become clickable. */
export function safeHref(url) {
  try {
    const u = new URL(String(url), location.href);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : "#";
  } catch {
    return "#";
  }
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

/**
 * A table that fits its column at every width: each cell carries its column's name (data-label),
 * so below the stylesheet's breakpoint a row is drawn as a small card of "name value" lines
 * instead of a row wider than the screen. Headers with a `num` class right-align their column.
 */
export function table(headers, rows, opts = {}) {
  const cols = headers.map((x) => (typeof x === "string" ? { label: x } : x));
  for (const r of [rows].flat(Infinity)) labelCells(r, cols);
  const t = h("table", { className: `fit ${opts.className ?? ""}`.trim() },
    h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col", className: c.num ? "num" : "" }, c.label)))),
    h("tbody", {}, rows));
  if (opts.id) t.id = opts.id;
  return h("div", { className: "table-box" }, t);
}

/** Rows appended later (a next page) get their labels the same way. */
export function labelCells(row, cols) {
  [...row.children].forEach((td, i) => {
    if (cols[i] && !td.dataset.label) td.dataset.label = typeof cols[i] === "string" ? cols[i] : cols[i].label;
  });
  return row;
}

/**
 * US dollars with the digits that matter: two decimals from $1 up, three significant digits below
 * (so $0.0009 and $0.0123, never $0.00 or $0.0000 for an amount that is not zero). Amounts come
 * rounded to the nano-dollar, so twelve decimals always reach the first significant digit.
 */
function usd(n) {
  if (n === null || n === undefined || !Number.isFinite(Number(n))) return "—";
  const v = Number(n);
  if (v === 0) return "$0.00";
  const a = Math.abs(v);
  const sign = v < 0 ? "-" : "";
  if (a >= 1) return `${sign}$${a.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  if (a < 1e-12) return `${sign}<$0.000000000001`;
  const decimals = Math.min(12, Math.max(2, 2 - Math.floor(Math.log10(a))));
  return `${sign}$${a.toFixed(decimals).replace(/(\.\d\d\d*?)0+$/, "$1")}`;
}

export const fmt = {
  int: (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US")),
  usd,
  pct: (n) => (n === null || n === undefined || !Number.isFinite(n) ? "—" : `${(n * 100).toFixed(1)}%`),
  ms: (n) => (n === null || n === undefined ? "—" : `${Math.round(n).toLocaleString("en-US")} ms`),
  time: (iso) => (iso ? new Date(iso).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "—"),
};
