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

/** A table inside a horizontally scrolling wrapper (narrow screens). */
export function table(headers, rows, opts = {}) {
  const t = h("table", { className: opts.className ?? "" },
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows));
  if (opts.id) t.id = opts.id;
  return h("div", { className: "scroll" }, t);
}

export const fmt = {
  int: (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US")),
  usd: (n) => (n === null || n === undefined ? "—" : `$${Number(n).toFixed(Math.abs(Number(n)) < 1 ? 4 : 2)}`),
  pct: (n) => (n === null || n === undefined || !Number.isFinite(n) ? "—" : `${(n * 100).toFixed(1)}%`),
  ms: (n) => (n === null || n === undefined ? "—" : `${Math.round(n).toLocaleString("en-US")} ms`),
  time: (iso) => (iso ? new Date(iso).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "—"),
};
