// Sluice dashboard: a client of the native API (/v1/), served from the
// binary. Every string from the broker goes into the page as text
// (textContent, createTextNode, attribute values), never as HTML.
"use strict";

// ---------- small helpers ----------

// h builds an element: attrs are properties or attributes ("on*" are
// listeners), children are nodes or strings (strings become text nodes).
function h(tag, attrs, ...children) {
  const el = tag.startsWith("svg:")
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function setText(el, s) {
  s = String(s);
  if (el.textContent !== s) el.textContent = s;
}

const nf = new Intl.NumberFormat("en");
function fmtInt(n) { return n === null || n === undefined ? "—" : nf.format(n); }
function fmtRate(r) {
  if (r === null || r === undefined) return "—";
  if (r === 0) return "0";
  if (r < 0.1) return "<0.1";
  return r < 10 ? r.toFixed(1) : nf.format(Math.round(r));
}
function fmtAge(s) {
  if (s === null || s === undefined) return "—";
  s = Math.floor(s);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
  if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
}
function fmtTime(t) {
  if (!t) return "—";
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}
const qpath = (name) => "/v1/queues/" + encodeURIComponent(name);

// fmtDuration writes seconds in the largest units that keep it exact
// enough ("4 d", "1 h 30 min", "45 s").
function fmtDuration(s) {
  if (s === null || s === undefined || isNaN(s)) return "—";
  s = Math.round(Number(s));
  if (s < 60) return s + " s";
  const parts = [];
  for (const [u, n] of [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]]) {
    if (s >= n && parts.length < 2) { parts.push(Math.floor(s / n) + " " + u); s %= n; } else if (parts.length) break;
  }
  return parts.join(" ");
}
// fmtBytes writes a size in KiB, MiB, GiB.
function fmtBytes(n) {
  if (n === null || n === undefined || isNaN(n)) return "—";
  n = Number(n);
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n < 10 ? n.toFixed(1).replace(/\.0$/, "") : String(Math.round(n))) + " " + units[i];
}
// fmtRel writes an instant against now (ms): "in 4 s", "12 s ago".
function fmtRel(t, now) {
  const at = typeof t === "number" ? t : Date.parse(t);
  if (!t || isNaN(at)) return "—";
  const d = (at - now) / 1000;
  if (Math.abs(d) < 1) return "now";
  return d > 0 ? "in " + fmtDuration(d) : fmtDuration(-d) + " ago";
}
// relTime is a <time> element showing t relative to the broker's clock,
// with the absolute instant on hover; tickRel rewrites every one on the
// page (once a second).
function relTime(t, prefix) {
  const el = h("time", { class: "rel", datetime: t, title: fmtTime(t), "data-prefix": prefix || "" });
  setText(el, (prefix || "") + fmtRel(t, nowMs()));
  return el;
}
// brokerSkew is the broker's time minus this browser's: from the live
// statistics' time on every page that follows them, else (the schedules
// page, a message's) from the Date header of the API's answers, to the
// second (a skew under 1.5 s is taken as none, so that times do not
// flicker).
let brokerSkew = 0, skewFromStats = false;
function noteBrokerTime(ms, precise) {
  if (isNaN(ms)) return;
  if (precise) { brokerSkew = ms - Date.now(); skewFromStats = true; return; }
  if (skewFromStats) return;
  const d = ms + 500 - Date.now();
  brokerSkew = Math.abs(d) < 1500 ? 0 : d;
}
function nowMs() { return Date.now() + brokerSkew; }
function tickRel() {
  const now = nowMs();
  for (const el of document.querySelectorAll("time.rel")) setText(el, el.dataset.prefix + fmtRel(el.getAttribute("datetime"), now));
}
setInterval(tickRel, 1000);

// The queue attributes with a unit: shown in human units, the raw value on
// hover.
const SECONDS_ATTRS = new Set(["MessageRetentionPeriod", "VisibilityTimeout", "DelaySeconds", "ReceiveMessageWaitTimeSeconds",
  "KmsDataKeyReusePeriodSeconds", "MessageTimeToLive", "DeduplicationWindowSeconds"]);
const BYTES_ATTRS = new Set(["MaximumMessageSize"]);
function humanAttr(k, v) {
  if (v === "" || v === undefined || v === null || !/^\d+$/.test(String(v))) return null;
  if (SECONDS_ATTRS.has(k)) return fmtDuration(Number(v));
  if (BYTES_ATTRS.has(k)) return fmtBytes(Number(v));
  return null;
}

// csrfToken is the token the broker set in the sluice_csrf cookie when it
// served this page; the broker refuses a state-changing call from a browser
// that does not echo it in the X-Sluice-CSRF header.
function csrfToken() {
  for (const part of document.cookie.split(";")) {
    const [k, v] = part.trim().split("=");
    if (k === "sluice_csrf") return v || "";
  }
  return "";
}

// api calls the native API and answers its JSON (null for 204). An error
// answer ({"code","message"}) throws an Error carrying both.
async function api(method, path, body) {
  const init = { method, headers: {} };
  if (method !== "GET" && method !== "HEAD") init.headers["X-Sluice-CSRF"] = csrfToken();
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await authFetch(path, init);
  noteBrokerTime(Date.parse(res.headers.get("Date") || ""), false);
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!res.ok) {
    const err = new Error((data && data.message) || (res.status + " " + res.statusText));
    err.status = res.status;
    err.code = data && data.code;
    throw err;
  }
  return data;
}

// ---------- access key ----------

// When the broker has access keys, the API answers 401: the page asks for
// a key id and secret (the #login dialog), keeps them for this tab in
// sessionStorage, and sends them as "Authorization: Bearer ID:SECRET". A
// broker without keys never answers 401, so the page opens directly.
const keyStore = "sluice_key";

function accessKey() {
  try { return sessionStorage.getItem(keyStore) || ""; } catch (e) { return ""; }
}

// reloading is set once a key was given: the page reloads with it, and a
// 401 that arrives meanwhile must not take it back.
let reloading = false;

// authFetch is fetch with the tab's key; a 401 opens the key dialog. A 401
// for a key that is no longer the tab's (a request sent before the user gave
// a new one, answered after) asks nothing: the answer is about the old key.
async function authFetch(path, init) {
  const key = accessKey();
  if (key) init.headers = Object.assign({}, init.headers, { Authorization: "Bearer " + key });
  const res = await fetch(path, init);
  if (res.status === 401 && key === accessKey()) askForKey(key ? "The broker refused this key." : "");
  return res;
}

// askForKey opens the key dialog once; a key given reloads the page with it.
function askForKey(message) {
  const dlg = document.getElementById("login");
  if (!dlg || dlg.open || reloading) return;
  setText(document.getElementById("login-error"), message);
  try { sessionStorage.removeItem(keyStore); } catch (e) { /* storage off: asked again */ }
  setConn("down", "access key needed");
  dlg.addEventListener("close", () => {
    const id = document.getElementById("login-id").value.trim();
    const secret = document.getElementById("login-secret").value;
    if (!id || !secret) return;
    try { sessionStorage.setItem(keyStore, id + ":" + secret); } catch (e) { /* keeps asking */ }
    reloading = true;
    location.reload();
  }, { once: true });
  dlg.showModal();
  document.getElementById("login-id").focus();
}

let toastTimer = 0;
function toast(msg, isError) {
  const el = document.getElementById("toast");
  el.className = "toast" + (isError ? " error" : "");
  setText(el, msg);
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => setText(el, ""), isError ? 8000 : 4000);
}

// confirmAction opens the in-page dialog and resolves true when the user
// confirms. The browser delivers a dialog's close event later, as a task:
// when the dialog is asked again before that (Cancel, then at once Delete
// again), the earlier showing is answered here from its returnValue, and
// its close event, arriving while the dialog is open for the new question,
// is not taken for the new answer.
let settleConfirm = null;
function confirmAction(title, text, okLabel) {
  const dlg = document.getElementById("confirm");
  if (settleConfirm) settleConfirm();
  setText(document.getElementById("confirm-title"), title);
  setText(document.getElementById("confirm-text"), text);
  setText(document.getElementById("confirm-ok"), okLabel || "Confirm");
  dlg.returnValue = "";
  return new Promise((resolve) => {
    const settle = () => {
      dlg.removeEventListener("close", onClose);
      if (settleConfirm === settle) settleConfirm = null;
      resolve(!dlg.open && dlg.returnValue === "ok");
    };
    const onClose = () => { if (!dlg.open) settle(); };
    settleConfirm = settle;
    dlg.addEventListener("close", onClose);
    if (!dlg.open) dlg.showModal();
    document.getElementById("confirm-cancel").focus();
  });
}

function setConn(state, text) {
  const el = document.getElementById("conn");
  el.className = "conn " + state;
  setText(el, text);
}

// ---------- live data ----------

// Live follows GET /v1/events (event "stats", every second); when the
// stream is not served or breaks, it polls GET /v1/stats every 2 s, and
// when that is not served either, GET /v1/queues (counts only). onData gets
// the /v1/stats document each time.
class Live {
  constructor(queue, onData) {
    this.queue = queue;
    this.onData = onData;
    this.closed = false;
    this.es = null;
    this.timer = 0;
    this.failures = 0;
    this.start();
  }
  start() {
    // EventSource cannot send a key: with one, poll (GET /v1/stats).
    if (typeof EventSource === "undefined" || accessKey()) return this.poll();
    const url = "/v1/events" + (this.queue ? "?queue=" + encodeURIComponent(this.queue) : "");
    const es = new EventSource(url);
    this.es = es;
    let opened = false;
    es.addEventListener("open", () => { opened = true; this.failures = 0; setConn("live", "live"); });
    es.addEventListener("stats", (ev) => {
      try { this.data(JSON.parse(ev.data)); } catch (e) { console.warn("bad stats event", e); }
    });
    es.addEventListener("error", () => {
      if (this.closed) return;
      es.close();
      this.es = null;
      this.failures++;
      // Never opened: the stream is not served; poll. Opened then broke:
      // poll meanwhile and try the stream again later.
      setConn("poll", "polling");
      this.poll();
      if (opened) this.retry = setTimeout(() => { if (!this.closed) { clearTimeout(this.timer); this.start(); } }, 10000);
    });
  }
  async poll() {
    if (this.closed) return;
    try {
      this.data(await fetchStats(this.queue));
      setConn("poll", "polling every 2 s");
    } catch (e) {
      setConn("down", "broker unreachable: " + e.message);
    }
    // Stop once the stream is open again (start sets this.es).
    if (!this.closed && !this.es) this.timer = setTimeout(() => this.poll(), 2000);
  }
  // data passes a statistics document on, its time (the broker's, unless
  // built here from GET /v1/queues) setting the broker's clock.
  data(doc) {
    if (!doc.local) noteBrokerTime(Date.parse(doc.time), true);
    this.onData(doc);
  }
  close() {
    this.closed = true;
    if (this.es) this.es.close();
    clearTimeout(this.timer);
    clearTimeout(this.retry);
  }
}

let statsRoute = true; // false once GET /v1/stats answered 404

// fetchStats answers the /v1/stats document, built from GET /v1/queues
// when the broker has no /v1/stats.
async function fetchStats(queue) {
  if (statsRoute) {
    try {
      const doc = await api("GET", "/v1/stats");
      if (queue) doc.queues = doc.queues.filter((q) => q.name === queue);
      return doc;
    } catch (e) {
      if (e.status !== 404 || e.code === "queue_not_found") throw e;
      statsRoute = false;
    }
  }
  const queues = [];
  if (queue) {
    const q = await api("GET", qpath(queue));
    queues.push(summaryToStats({ name: q.name, fifo: q.fifo, paused: q.attributes.Paused === "true", stats: q.stats }, q.deadLetterQueue));
  } else {
    let after = "";
    for (;;) {
      const page = await api("GET", "/v1/queues?limit=1000" + (after ? "&after=" + encodeURIComponent(after) : ""));
      for (const q of page.queues) queues.push(summaryToStats(q));
      if (!page.next) break;
      after = page.next;
    }
  }
  return { time: new Date(nowMs()).toISOString(), local: true, queues };
}

function summaryToStats(q, dlq) {
  return {
    name: q.name, fifo: q.fifo, paused: q.paused,
    visible: q.stats.visible, inFlight: q.stats.inFlight, delayed: q.stats.delayed,
    deadLetterQueue: dlq || "", deadLetters: q.stats.deadLetters,
    oldestAgeSeconds: q.stats.oldestAgeSeconds, oldestVisibleAgeSeconds: q.stats.oldestVisibleAgeSeconds,
    rates: null, health: null, healthReasons: [],
  };
}

function healthBadge(q) {
  const hs = q.health || "unknown";
  const label = { ok: "OK", warning: "Warning", critical: "Critical", unknown: "—" }[hs] || hs;
  return { cls: "badge " + hs, label, reasons: (q.healthReasons || []).join("; ") };
}

// deletedAt holds the queues this tab deleted, with when: for a moment
// after a deletion the live statistics may still name the queue (a sample
// taken before it), and the list would show it again and read its history
// (a 404, an error in the console). They are left out for 10 s.
const deletedAt = new Map();
function justDeleted(name) {
  const t = deletedAt.get(name);
  if (t === undefined) return false;
  if (Date.now() - t < 10000) return true;
  deletedAt.delete(name);
  return false;
}

// ---------- router ----------

let page = null; // the current page: { close() }

function route() {
  if (page && page.close) page.close();
  page = null;
  const main = document.getElementById("main");
  main.replaceChildren();
  const hash = decodeURIComponent(location.hash.replace(/^#/, ""));
  const raw = location.hash.replace(/^#/, "");
  const m = /^\/queues\/([^/]+)(?:\/(messages|dead-letters))?$/.exec(raw);
  const msg = /^\/queues\/([^/]+)\/messages\/([^/]+)$/.exec(raw);
  if (m) {
    page = new QueuePage(main, decodeURIComponent(m[1]), m[2] || "overview");
  } else if (msg) {
    page = new MessagePage(main, decodeURIComponent(msg[1]), decodeURIComponent(msg[2]));
  } else if (hash === "/overview") {
    page = new OverviewPage(main);
  } else if (hash === "/schedules") {
    page = new SchedulesPage(main);
  } else if (hash === "" || hash === "/") {
    page = new ListPage(main);
  } else {
    main.append(h("h1", {}, "Not found"), h("p", {}, "No page here. ", h("a", { href: "#/" }, "Back to the queues")));
  }
  main.focus({ preventScroll: true });
}

// ---------- the queue list ----------

const COLUMNS = [
  { key: "name", label: "Queue" },
  { key: "health", label: "Health" },
  { key: "visible", label: "Visible", num: true },
  { key: "inFlight", label: "In flight", num: true },
  { key: "delayed", label: "Delayed", num: true },
  { key: "deadLetters", label: "Dead letters", num: true },
  // How long the longest-visible message has waited: the age health judges
  // (delayed and backing-off messages do not wait).
  { key: "oldestVisibleAgeSeconds", label: "Waiting", num: true },
  { key: "sent", label: "Sent/s", num: true },
  { key: "received", label: "Received/s", num: true },
  { key: "deleted", label: "Deleted/s", num: true },
  { key: "trend", label: "Depth trend" },
];
const HEALTH_RANK = { critical: 3, warning: 2, ok: 1 };
const PAGE_SIZES = [50, 100, 250];
// The depth sparkline spans the last 15 minutes, a sample every 5 s at
// most: seeded from the queue's history route, then one from the live data.
const TREND_WINDOW = 15 * 60 * 1000, TREND_STEP = 5000;

function sortValue(q, key) {
  switch (key) {
    case "name": return q.name;
    case "health": return HEALTH_RANK[q.health] || 0;
    case "sent": case "received": case "deleted": return q.rates ? q.rates[key] : -1;
    case "deadLetters": return q.deadLetters === null || q.deadLetters === undefined ? -1 : q.deadLetters;
    default: return q[key];
  }
}

class ListPage {
  constructor(main) {
    // Storage off (blocked by the browser) or a value spoiled: defaults.
    let saved = {};
    try { saved = JSON.parse(sessionStorage.getItem("sluice.list") || "{}") || {}; } catch (e) { saved = {}; }
    this.sortKey = saved.sortKey || "name";
    this.sortDir = saved.sortDir || 1;
    this.filter = saved.filter || "";
    this.pageSize = saved.pageSize || 50;
    this.page = 0;
    this.queues = [];
    this.rows = new Map(); // name -> row element, reused across updates
    this.trend = new Map(); // name -> depth samples
    this.build(main);
    this.live = new Live("", (doc) => this.update(doc));
  }
  save() {
    try {
      sessionStorage.setItem("sluice.list", JSON.stringify({ sortKey: this.sortKey, sortDir: this.sortDir, filter: this.filter, pageSize: this.pageSize }));
    } catch (e) { /* storage off: the view is not kept */ }
  }
  build(main) {
    this.summary = h("p", { class: "summary", id: "summary", "aria-live": "polite" }, "Loading…");
    const filter = h("input", { type: "search", id: "filter", placeholder: "Filter by name", "aria-label": "Filter queues by name", value: this.filter });
    filter.addEventListener("input", () => { this.filter = filter.value; this.page = 0; this.save(); this.render(); });
    const size = h("select", { id: "page-size", "aria-label": "Rows per page" },
      PAGE_SIZES.map((n) => h("option", { value: n, selected: n === this.pageSize }, n + " per page")));
    size.addEventListener("change", () => { this.pageSize = Number(size.value); this.page = 0; this.save(); this.render(); });
    this.headRow = h("tr", {}, COLUMNS.map((c) => {
      const th = h("th", { scope: "col", class: c.num ? "num" : null, "data-key": c.key });
      if (c.key === "trend") th.append(c.label);
      else th.append(h("button", { type: "button", onclick: () => this.sortBy(c.key) }, c.label));
      return th;
    }));
    this.tbody = h("tbody", { id: "queue-rows" });
    this.table = h("table", { id: "queues" }, h("caption", { class: "sr" }, "Queues"), h("thead", {}, this.headRow), this.tbody);
    this.empty = h("p", { class: "empty", hidden: true });
    this.prev = h("button", { type: "button", id: "prev-page", onclick: () => { this.page--; this.render(); } }, "← Previous");
    this.next = h("button", { type: "button", id: "next-page", onclick: () => { this.page++; this.render(); } }, "Next →");
    this.pageInfo = h("span", { id: "page-info", class: "muted" });
    this.createBox = h("div", { class: "sendform", id: "create-queue", hidden: true });
    const newBtn = h("button", { type: "button", id: "new-queue", class: "primary", onclick: () => this.openCreate() }, "New queue…");
    main.append(
      h("div", { class: "bar" }, h("h1", {}, "Queues"), h("span", { class: "grow" }), newBtn),
      this.createBox,
      h("div", { class: "bar" }, filter, size, h("span", { class: "grow" }), this.summary),
      h("div", { class: "scroll" }, this.table), this.empty,
      h("div", { class: "pager" }, this.prev, this.pageInfo, this.next),
    );
    this.markSort();
  }
  // openCreate shows the form that creates a queue (POST /v1/queues).
  openCreate() {
    const name = h("input", { type: "text", id: "qf-name", required: true, placeholder: "orders", autocomplete: "off" });
    const fifo = h("input", { type: "checkbox", id: "qf-fifo" });
    const form = queueForm({}, true);
    const err = h("p", { class: "error", id: "create-error", role: "alert" });
    const ok = h("button", { type: "button", class: "primary", id: "create-ok" }, "Create");
    const cancel = h("button", { type: "button", id: "create-cancel", onclick: () => { this.createBox.hidden = true; } }, "Cancel");
    ok.addEventListener("click", async () => {
      const n = name.value.trim();
      try {
        const attrs = await formAttributes(form);
        if (fifo.checked) attrs.FifoQueue = "true";
        await api("POST", "/v1/queues", { name: n, attributes: attrs });
        deletedAt.delete(n);
        toast("Created the queue " + n + ".");
        location.hash = "#/queues/" + encodeURIComponent(n);
      } catch (e) { setText(err, e.message); }
    });
    this.createBox.replaceChildren(h("h2", {}, "New queue"),
      h("div", { class: "field" }, h("label", { for: "qf-name" }, "Name"), name, h("label", { class: "inline" }, fifo, " FIFO (the name ends in .fifo)")),
      form.el, err, h("div", { class: "bar" }, ok, cancel));
    this.createBox.hidden = false;
    name.focus();
  }
  sortBy(key) {
    if (this.sortKey === key) this.sortDir = -this.sortDir;
    else { this.sortKey = key; this.sortDir = key === "name" ? 1 : -1; }
    this.save();
    this.markSort();
    this.render();
  }
  markSort() {
    for (const th of this.headRow.children) {
      if (th.dataset.key === this.sortKey) th.setAttribute("aria-sort", this.sortDir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    }
  }
  update(doc) {
    this.queues = (doc.queues || []).filter((q) => !justDeleted(q.name));
    const names = new Set();
    const now = Date.parse(doc.time) || Date.now();
    this.now = now;
    for (const q of this.queues) {
      names.add(q.name);
      let t = this.trend.get(q.name);
      if (!t) { t = []; this.trend.set(q.name, t); }
      const last = t[t.length - 1];
      if (last && now - last.t < TREND_STEP) last.v = q.visible + q.inFlight + q.delayed;
      else t.push({ t: now, v: q.visible + q.inFlight + q.delayed });
      while (t.length && now - t[0].t > TREND_WINDOW) t.shift();
    }
    // A deleted queue's row and samples go.
    for (const name of this.trend.keys()) if (!names.has(name)) { this.trend.delete(name); this.rows.delete(name); }
    this.render();
  }
  render() {
    const f = this.filter.trim().toLowerCase();
    let list = f ? this.queues.filter((q) => q.name.toLowerCase().includes(f)) : this.queues.slice();
    const key = this.sortKey, dir = this.sortDir;
    list.sort((a, b) => {
      const va = sortValue(a, key), vb = sortValue(b, key);
      if (va < vb) return -dir;
      if (va > vb) return dir;
      return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    });
    const pages = Math.max(1, Math.ceil(list.length / this.pageSize));
    this.page = Math.min(Math.max(0, this.page), pages - 1);
    const shown = list.slice(this.page * this.pageSize, (this.page + 1) * this.pageSize);
    // Only the rows of the page are in the document; each keeps its
    // element across updates and only the cells whose text changed are
    // written.
    const body = this.tbody;
    shown.forEach((q, i) => {
      let row = this.rows.get(q.name);
      if (!row) { row = this.makeRow(q.name); this.rows.set(q.name, row); }
      this.fillRow(row, q);
      if (body.children[i] !== row) body.insertBefore(row, body.children[i] || null);
    });
    while (body.children.length > shown.length) body.lastChild.remove();

    let warn = 0, crit = 0;
    for (const q of this.queues) { if (q.health === "warning") warn++; else if (q.health === "critical") crit++; }
    setText(this.summary, fmtInt(this.queues.length) + " queues · " + crit + " critical · " + warn + " warning" + (f ? " · " + fmtInt(list.length) + " match" : ""));
    this.empty.hidden = list.length > 0;
    this.table.hidden = list.length === 0;
    setText(this.empty, this.queues.length === 0 ? "No queues yet. Create one with the native API (POST /v1/queues) or any SQS client." : "No queue name contains \u201c" + this.filter + "\u201d.");
    setText(this.pageInfo, list.length ? "Page " + (this.page + 1) + " of " + pages + " (" + fmtInt(list.length) + " queues)" : "");
    this.prev.disabled = this.page === 0;
    this.next.disabled = this.page >= pages - 1;
  }
  makeRow(name) {
    const cells = {};
    const row = h("tr", { "data-queue": name });
    for (const c of COLUMNS) {
      const td = h("td", { class: c.num ? "num" : null, "data-col": c.key });
      cells[c.key] = td;
      row.append(td);
    }
    const link = h("a", { class: "qname", href: "#/queues/" + encodeURIComponent(name) }, name);
    cells.name.append(link);
    cells.nameTags = h("span", {});
    cells.name.append(cells.nameTags);
    cells.badge = h("span", {});
    cells.reasons = h("div", { class: "reasons" });
    cells.health.append(cells.badge, cells.reasons);
    cells.spark = h("svg:svg", { class: "spark", viewBox: "0 0 90 22", preserveAspectRatio: "none", role: "img", "aria-label": "depth trend" });
    cells.sparkLine = h("svg:polyline", {});
    cells.spark.append(cells.sparkLine);
    cells.trend.append(cells.spark);
    row._cells = cells;
    return row;
  }
  fillRow(row, q) {
    const c = row._cells;
    const tags = (q.fifo ? "FIFO" : "") + (q.paused ? "|paused" : "");
    if (row._tags !== tags) {
      row._tags = tags;
      c.nameTags.replaceChildren(...(q.fifo ? [h("span", { class: "tag" }, "FIFO")] : []), ...(q.paused ? [h("span", { class: "tag" }, "paused")] : []));
    }
    const b = healthBadge(q);
    if (c.badge.className !== b.cls) c.badge.className = b.cls;
    setText(c.badge, b.label);
    setText(c.reasons, b.reasons);
    setText(c.visible, fmtInt(q.visible));
    setText(c.inFlight, fmtInt(q.inFlight));
    setText(c.delayed, fmtInt(q.delayed));
    setText(c.deadLetters, fmtInt(q.deadLetters));
    setText(c.oldestVisibleAgeSeconds, q.visible ? fmtAge(q.oldestVisibleAgeSeconds) : "—");
    for (const k of ["sent", "received", "deleted"]) setText(c[k], fmtRate(q.rates ? q.rates[k] : null));
    // The last 15 minutes, now at the right, scaled to the largest (an
    // empty queue's line lies at the bottom).
    const t = this.trend.get(q.name) || [];
    const max = Math.max(1, ...t.map((p) => p.v)) * 1.1;
    const now = this.now || Date.now();
    const pts = t.map((p) => (90 - ((now - p.t) / TREND_WINDOW) * 90).toFixed(1) + "," + (21 - (p.v / max) * 20).toFixed(1)).join(" ");
    if (c.sparkLine.getAttribute("points") !== pts) c.sparkLine.setAttribute("points", pts);
    if (!row._seeded) { row._seeded = true; this.seed(q.name); }
  }
  // seed reads a shown queue's history (one read at a time) and puts its
  // points before the live samples, so that a sparkline is drawn at once.
  seed(name) {
    (this.seeds = this.seeds || []).push(name);
    if (this.seeding) return;
    this.seeding = true;
    const next = async () => {
      const n = this.seeds.shift();
      if (n === undefined || this.closed) { this.seeding = false; return; }
      try {
        const doc = await api("GET", qpath(n) + "/history");
        const t = this.trend.get(n);
        if (t) {
          const first = t.length ? t[0].t : Infinity;
          const old = (doc.points || []).map((p) => ({ t: Date.parse(p.time), v: p.visible + p.inFlight + p.delayed })).filter((p) => p.t < first - TREND_STEP / 2);
          t.unshift(...old);
          const q = this.queues.find((x) => x.name === n);
          const row = this.rows.get(n);
          if (q && row) this.fillRow(row, q);
        }
      } catch (e) { /* a queue gone, or no history route: live samples only */ }
      next();
    };
    next();
  }
  close() { this.closed = true; this.live.close(); }
}

// ---------- charts (inline SVG) ----------

// drawChart draws series over time into an SVG: series is [{label, cls,
// values}], times the matching timestamps (ms). The drawing is in the
// SVG's own pixels (its width measured, so that text is never stretched),
// with five value ticks, a time tick every few minutes, and on hover a
// line at the nearest point with every series' value there.
function drawChart(svg, times, series, unit) {
  const W = Math.max(200, Math.round(svg.clientWidth || svg.getBoundingClientRect().width || 400));
  const H = 160, L = 44, R = 8, T = 8, B = 20;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.replaceChildren();
  let max = 0;
  for (const s of series) for (const v of s.values) if (v > max) max = v;
  max = niceMax(max);
  const t0 = times.length ? times[0] : 0, t1 = times.length ? times[times.length - 1] : 1;
  const x = (t) => L + ((t - t0) / Math.max(1, t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    svg.append(h("svg:line", { class: i ? "grid" : "axis", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(h("svg:text", { x: L - 5, y: y(v) + 3, "text-anchor": "end" }, shortNum(v)));
  }
  if (times.length > 1) {
    // Time ticks: minutes before the newest point, every 1, 2, 5 or 10
    // minutes so that at most 6 fit.
    const spanMin = (t1 - t0) / 60000;
    const every = [1, 2, 5, 10, 15].find((m) => spanMin / m <= 6) || 15;
    for (let m = 0; m <= spanMin; m += every) {
      const tx = x(t1 - m * 60000);
      svg.append(h("svg:line", { class: "grid", x1: tx, x2: tx, y1: T, y2: H - B }));
      svg.append(h("svg:text", { x: tx, y: H - 5, "text-anchor": m === 0 ? "end" : "middle" }, m === 0 ? "now" : "−" + m + " min"));
    }
  } else {
    svg.append(h("svg:text", { x: (L + W) / 2, y: H / 2, "text-anchor": "middle", class: "nodata" }, "gathering data…"));
  }
  for (const s of series) {
    const pts = s.values.map((v, i) => x(times[i]).toFixed(1) + "," + y(v).toFixed(1)).join(" ");
    svg.append(h("svg:polyline", { class: s.cls, points: pts, "data-series": s.label }, h("svg:title", {}, s.label + (unit ? " (" + unit + ")" : ""))));
  }
  // Hover: the nearest point's time and values.
  const cursor = h("svg:line", { class: "cursor", x1: 0, x2: 0, y1: T, y2: H - B, visibility: "hidden" });
  const tip = h("svg:g", { class: "tip", visibility: "hidden" });
  svg.append(cursor, tip);
  svg.onmousemove = (ev) => {
    if (!times.length) return;
    const r = svg.getBoundingClientRect();
    const px = ((ev.clientX - r.left) / r.width) * W;
    let best = 0;
    for (let i = 1; i < times.length; i++) if (Math.abs(x(times[i]) - px) < Math.abs(x(times[best]) - px)) best = i;
    showTip(svg, best);
  };
  svg.onmouseleave = () => { cursor.setAttribute("visibility", "hidden"); tip.setAttribute("visibility", "hidden"); };
  // showTip is also what a test calls (the SVG's showPoint) to read the
  // values at a point without a mouse.
  const showTip = (svgEl, i) => {
    const cx = x(times[i]);
    cursor.setAttribute("x1", cx); cursor.setAttribute("x2", cx);
    cursor.setAttribute("visibility", "visible");
    const lines = [fmtClock(times[i])].concat(series.map((s) => s.label + " " + fmtValue(s.values[i], unit)));
    const bw = 8 + 6.2 * Math.max(...lines.map((l) => l.length)), bh = 6 + 13 * lines.length;
    const bx = cx + 8 + bw > W - R ? cx - 8 - bw : cx + 8;
    tip.replaceChildren(h("svg:rect", { x: bx, y: T, width: bw, height: bh, rx: 4 }),
      ...lines.map((l, k) => h("svg:text", { x: bx + 5, y: T + 14 + 13 * k, class: k ? series[k - 1].cls + "-text" : "" }, l)));
    tip.setAttribute("visibility", "visible");
    svg.dataset.tip = lines.join(" | ");
  };
  svg.showPoint = (i) => showTip(svg, i < 0 ? times.length + i : i);
}
function fmtClock(t) { return new Date(t).toISOString().slice(11, 19) + "Z"; }
function fmtValue(v, unit) {
  if (v === null || v === undefined) return "—";
  return unit ? fmtRate(v) + "/s" : fmtInt(v);
}
function niceMax(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}
function shortNum(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(v % 1e6 ? 1 : 0) + "M";
  if (v >= 1e3) return (v / 1e3).toFixed(v % 1e3 ? 1 : 0) + "k";
  return String(Math.round(v * 10) / 10);
}

// ---------- the queue page ----------

const HISTORY_KEEP = 15 * 60; // seconds of points kept on the charts

class QueuePage {
  constructor(main, name, tab) {
    this.name = name;
    this.tab = tab;
    this.main = main;
    this.points = []; // {time(ms), visible, inFlight, delayed, deadLetters, sent, received, deleted}
    this.info = null;
    this.sources = [];
    // ready settles once the queue and its source queues are known (the
    // dead letters' mode depends on both).
    this.ready = this.loadInfo();
    this.build();
    if (tab === "overview") this.loadHistory();
    this.loadConsumers();
    this.live = new Live(name, (doc) => this.update(doc));
  }
  build() {
    const n = this.name;
    const base = "#/queues/" + encodeURIComponent(n);
    this.title = h("h1", { id: "queue-title" }, n);
    this.tags = h("span", {});
    this.pauseBtn = h("button", { type: "button", id: "pause", onclick: () => this.pauseResume() }, "Pause");
    this.actions = h("div", { class: "bar" },
      this.pauseBtn,
      h("button", { type: "button", id: "purge", class: "danger", onclick: () => this.purge() }, "Purge…"),
      h("button", { type: "button", id: "delete-queue", class: "danger", onclick: () => this.deleteQueue() }, "Delete queue…"),
      h("span", { class: "grow" }),
      this.findBox(base),
      h("a", { href: "#/" }, "← All queues"));
    const card = (id, label) => h("div", { class: "card" }, h("div", { class: "label" }, label), h("div", { class: "value", id }, "—"));
    this.badge = h("span", { class: "badge unknown", id: "health" }, "—");
    this.reasons = h("span", { class: "reasons", id: "health-reasons" });
    const tab = (id, label) => h("a", { href: base + (id === "overview" ? "" : "/" + id), id: "tab-" + id, "aria-current": this.tab === id ? "page" : null }, label);
    this.dlqOf = h("p", { class: "dlq-of", id: "dlq-of", hidden: true });
    this.main.append(
      h("p", { class: "muted" }, h("a", { href: "#/" }, "Queues"), " / "),
      h("div", { class: "bar" }, this.title, this.tags, this.badge, this.reasons),
      this.dlqOf,
      this.actions,
      h("div", { class: "cards" },
        card("stat-visible", "Visible"), card("stat-inflight", "In flight"), card("stat-delayed", "Delayed"),
        card("stat-deadletters", "Dead letters"), card("stat-waiting", "Longest wait (visible)"), card("stat-oldest", "Oldest message"),
        card("stat-sent", "Sent/s (last min)"), card("stat-received", "Received/s (last min)"),
        card("stat-consumers", "Consumer streams")),
      h("nav", { class: "tabs", "aria-label": "Queue sections" }, tab("overview", "Overview"), tab("messages", "Messages"), tab("dead-letters", "Dead letters")),
    );
    this.section = h("section", { id: "section-" + this.tab });
    this.main.append(this.section);
    if (this.tab === "overview") this.buildOverview();
    else if (this.tab === "messages") this.buildMessages();
    else this.buildDeadLetters();
  }

  // findBox is the search by message id: it opens the message's page.
  findBox(base) {
    const input = h("input", { type: "search", id: "find-id", placeholder: "Message id", "aria-label": "Find a message by id", class: "find" });
    const form = h("form", { class: "find-form", role: "search" }, input, h("button", { type: "submit", id: "find-go" }, "Find"));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const id = input.value.trim();
      if (id) location.hash = base + "/messages/" + encodeURIComponent(id);
    });
    return form;
  }

  // --- live numbers ---
  update(doc) {
    const q = (doc.queues || []).find((x) => x.name === this.name);
    if (!q) return;
    this.stats = q;
    this.brokerTime = Date.parse(doc.time) || null;
    this.loadConsumers();
    // The Messages and Dead letters tabs are live too: their first page is
    // read again every 2 s (not once more pages were loaded).
    if (Date.now() - (this.listAt || 0) >= 2000) {
      this.listAt = Date.now();
      if (this.tab === "messages" && !this.msgPaged && this.msgBody) this.loadMessages();
      if (this.flow) this.flow.read();
      if (this.tab === "dead-letters" && !this.dlPaged && !this.dlNoQueue && this.dlBody && this.dlHead.children.length) this.loadDeadLetters();
    }
    setText(document.getElementById("stat-visible"), fmtInt(q.visible));
    setText(document.getElementById("stat-inflight"), fmtInt(q.inFlight));
    setText(document.getElementById("stat-delayed"), fmtInt(q.delayed));
    setText(document.getElementById("stat-deadletters"), fmtInt(q.deadLetters));
    setText(document.getElementById("stat-waiting"), q.visible ? fmtAge(q.oldestVisibleAgeSeconds) : "—");
    setText(document.getElementById("stat-oldest"), q.visible + q.inFlight + q.delayed ? fmtAge(q.oldestAgeSeconds) : "—");
    setText(document.getElementById("stat-sent"), fmtRate(q.rates ? q.rates.sent : null));
    setText(document.getElementById("stat-received"), fmtRate(q.rates ? q.rates.received : null));
    const b = healthBadge(q);
    this.badge.className = b.cls;
    setText(this.badge, b.label);
    setText(this.reasons, b.reasons);
    this.setPaused(q.paused);
    if (this.flow) this.flow.update(q);
    if (this.tab === "overview") {
      const t = Date.parse(doc.time) || Date.now();
      const last = this.points[this.points.length - 1];
      if (!last || t - last.time >= 1000) {
        this.points.push({ time: t, visible: q.visible, inFlight: q.inFlight, delayed: q.delayed, deadLetters: q.deadLetters || 0,
          sent: q.rates ? q.rates.sent : null, received: q.rates ? q.rates.received : null, deleted: q.rates ? q.rates.deleted : null,
          nacked: q.rates ? q.rates.nacked : null, deadLettered: q.rates ? q.rates.deadLettered : null });
        while (this.points.length && t - this.points[0].time > HISTORY_KEEP * 1000) this.points.shift();
        this.drawCharts();
      }
    }
  }
  setPaused(p) {
    this.paused = p;
    setText(this.pauseBtn, p ? "Resume" : "Pause");
    this.pauseBtn.setAttribute("aria-pressed", p ? "true" : "false");
    this.tags.replaceChildren(...(this.info && this.info.fifo ? [h("span", { class: "tag" }, "FIFO")] : []), ...(p ? [h("span", { class: "tag", id: "paused-tag" }, "paused")] : []));
  }

  async loadInfo() {
    try {
      this.info = await api("GET", qpath(this.name));
    } catch (e) {
      if (e.status === 404) {
        this.main.replaceChildren(h("h1", {}, this.name), h("p", { class: "empty" }, "This queue does not exist (any more). ", h("a", { href: "#/" }, "Back to the queues")));
        this.close();
        return;
      }
      toast("Could not load the queue: " + e.message, true);
      return;
    }
    this.setPaused(this.info.attributes.Paused === "true");
    await this.loadSources();
    if (this.settings) this.fillSettings();
    if (this.onInfo) this.onInfo();
  }
  // loadSources finds the queues whose RedrivePolicy names this one (from
  // GET /v1/stats, which lists every queue's dead-letter queue): they make
  // it a dead-letter queue, and its page names them.
  async loadSources() {
    let doc;
    try { doc = await api("GET", "/v1/stats"); } catch (e) { return; }
    this.sources = (doc.queues || []).filter((x) => x.deadLetterQueue === this.name && x.name !== this.name).map((x) => x.name);
    if (!this.sources.length || !this.dlqOf) return;
    const links = [];
    this.sources.forEach((s, i) => { if (i) links.push(", "); links.push(h("a", { class: "qname", href: "#/queues/" + encodeURIComponent(s) }, s)); });
    this.dlqOf.replaceChildren(h("span", { class: "tag dlq" }, "dead-letter queue"), " of ", ...links,
      ". Its health counts the letters it holds, not their age. ",
      this.tab === "dead-letters" ? "" : h("a", { href: "#/queues/" + encodeURIComponent(this.name) + "/dead-letters", id: "dlq-review" }, "Review and replay them →"));
    this.dlqOf.hidden = false;
  }

  // --- overview: charts and settings ---
  buildOverview() {
    this.depthSvg = h("svg:svg", { role: "img", "aria-labelledby": "chart-depth-title", id: "chart-depth" });
    this.rateSvg = h("svg:svg", { role: "img", "aria-labelledby": "chart-rates-title", id: "chart-rates" });
    this.settings = h("dl", { class: "settings", id: "settings" });
    this.sendForm();
    this.section.append(
      h("div", { class: "charts" },
        h("div", { class: "chart" }, h("h3", { id: "chart-depth-title" }, "Depth"), this.depthSvg,
          h("div", { class: "legend" }, h("span", { class: "l1" }, "visible"), h("span", { class: "l2" }, "in flight"), h("span", { class: "l3" }, "delayed"), h("span", { class: "l4" }, "dead letters"))),
        h("div", { class: "chart" }, h("h3", { id: "chart-rates-title" }, "Rates (messages/s)"), this.rateSvg,
          h("div", { class: "legend" }, h("span", { class: "lr1" }, "sent"), h("span", { class: "lr2" }, "received"), h("span", { class: "lr3" }, "deleted"),
            h("span", { class: "lr4" }, "nacked"), h("span", { class: "lr5" }, "dead-lettered")))),
      h("div", { class: "bar" }, h("h2", {}, "Flow"), h("span", { class: "muted" }, "The first 100 messages, read every 2 s (a browse: nothing is received). Each dot opens its message.")),
      (this.flow = new Flow(this)).el,
      ...this.buildConsumers(),
      h("h2", {}, "Send a test message"), this.sendBox,
      h("div", { class: "bar" }, h("h2", {}, "Settings"), h("span", { class: "grow" }),
        h("button", { type: "button", id: "edit-settings", onclick: () => this.openEdit() }, "Edit settings…")),
      this.editBox = h("div", { class: "sendform", id: "edit-queue", hidden: true }),
      this.settings);
    this.drawCharts();
    // The charts are drawn in their own pixels: again when the window's
    // width changes.
    this.onResize = () => { clearTimeout(this.resizeTimer); this.resizeTimer = setTimeout(() => this.drawCharts(), 150); };
    window.addEventListener("resize", this.onResize);
  }
  sendForm() {
    const ta = h("textarea", { id: "send-body", "aria-label": "Message body" });
    ta.value = '{"test": true}';
    const group = h("input", { type: "text", id: "send-group", "aria-label": "Message group id (FIFO)", placeholder: "group id (FIFO queues)" });
    const btn = h("button", { type: "button", id: "send", class: "primary" }, "Send");
    btn.addEventListener("click", async () => {
      const body = { body: ta.value };
      if (group.value) body.groupId = group.value;
      if (this.info && this.info.fifo && !body.groupId) body.groupId = "dashboard";
      if (this.info && this.info.fifo && this.info.attributes.ContentBasedDeduplication !== "true") body.dedupId = String(Date.now()) + Math.random().toString(36).slice(2, 8);
      try {
        const r = await api("POST", qpath(this.name) + "/messages", body);
        toast("Sent message " + r.id);
        if (this.tab === "messages") this.loadMessages();
      } catch (e) { toast("Send failed: " + e.message, true); }
    });
    this.sendBox = h("div", { class: "sendform" }, h("label", { for: "send-body" }, "Body"), ta,
      h("div", { class: "bar" }, group, btn));
  }
  async loadHistory() {
    let doc;
    try {
      doc = await api("GET", qpath(this.name) + "/history");
    } catch (e) {
      // 404: the queue is gone, or an older broker without the history
      // route; the charts fill from the live events.
      if (e.status !== 404) toast("Could not load the history: " + e.message, true);
      return;
    }
    const old = (doc.points || []).map((p) => ({ time: Date.parse(p.time), visible: p.visible, inFlight: p.inFlight, delayed: p.delayed,
      deadLetters: p.deadLetters || 0, sent: p.sent, received: p.received, deleted: p.deleted, nacked: p.nacked, deadLettered: p.deadLettered }));
    const first = this.points.length ? this.points[0].time : Infinity;
    this.points = old.filter((p) => p.time < first).concat(this.points);
    this.drawCharts();
  }
  drawCharts() {
    if (!this.depthSvg) return;
    const ps = this.points;
    const times = ps.map((p) => p.time);
    drawChart(this.depthSvg, times, [
      { label: "visible", cls: "s1", values: ps.map((p) => p.visible) },
      { label: "in flight", cls: "s2", values: ps.map((p) => p.inFlight) },
      { label: "delayed", cls: "s3", values: ps.map((p) => p.delayed) },
      { label: "dead letters", cls: "s4", values: ps.map((p) => p.deadLetters) },
    ]);
    const withRates = ps.filter((p) => p.sent !== null && p.sent !== undefined);
    drawChart(this.rateSvg, withRates.map((p) => p.time), [
      { label: "sent", cls: "r1", values: withRates.map((p) => p.sent) },
      { label: "received", cls: "r2", values: withRates.map((p) => p.received) },
      { label: "deleted", cls: "r3", values: withRates.map((p) => p.deleted) },
      { label: "nacked", cls: "r4", values: withRates.map((p) => p.nacked || 0) },
      { label: "dead-lettered", cls: "r5", values: withRates.map((p) => p.deadLettered || 0) },
    ], "messages/s");
  }
  // openEdit shows the settings form; Save sends the changed attributes
  // (PATCH /v1/queues/NAME) and shows the API's error as it is.
  openEdit() {
    if (!this.info) return;
    const form = queueForm(this.info.attributes || {}, false);
    const err = h("p", { class: "error", id: "edit-error", role: "alert" });
    const save = h("button", { type: "button", class: "primary", id: "edit-save" }, "Save");
    save.addEventListener("click", async () => {
      try {
        const attrs = await formAttributes(form);
        if (!Object.keys(attrs).length) { this.editBox.hidden = true; return; }
        await api("PATCH", qpath(this.name), { attributes: attrs });
        toast("Saved the settings of " + this.name + ".");
        this.editBox.hidden = true;
        await this.loadInfo();
      } catch (e) { setText(err, e.message); }
    });
    this.editBox.replaceChildren(form.el, err, h("div", { class: "bar" }, save,
      h("button", { type: "button", id: "edit-cancel", onclick: () => { this.editBox.hidden = true; } }, "Cancel")));
    this.editBox.hidden = false;
  }
  fillSettings() {
    const q = this.info;
    const rows = [["Name", q.name], ["ARN", q.arn], ["Type", q.fifo ? "FIFO" : "standard"],
      ["Dead-letter queue", q.deadLetterQueue || "none"], ["Created", fmtTime(q.createdAt)], ["Modified", fmtTime(q.modifiedAt)]];
    for (const k of Object.keys(q.attributes || {}).sort()) rows.push([k, q.attributes[k]]);
    for (const k of Object.keys(q.tags || {}).sort()) rows.push(["tag " + k, q.tags[k]]);
    this.settings.replaceChildren(...rows.flatMap(([k, v]) => {
      const human = humanAttr(k, v);
      const dd = human ? h("dd", { title: k + " " + v, "data-raw": v }, human) : h("dd", {}, v === "" || v === undefined ? "—" : v);
      if (k === "Dead-letter queue" && q.deadLetterQueue) dd.replaceChildren(h("a", { href: "#/queues/" + encodeURIComponent(q.deadLetterQueue) }, q.deadLetterQueue));
      return [h("dt", {}, k), dd];
    }));
  }

  // --- actions ---
  async pauseResume() {
    const what = this.paused ? "resume" : "pause";
    try {
      const q = await api("POST", qpath(this.name) + "/" + what);
      this.setPaused(q && q.attributes ? q.attributes.Paused === "true" : !this.paused);
      toast(what === "pause" ? "Paused: receives get nothing until you resume." : "Resumed.");
    } catch (e) { toast("Could not " + what + ": " + e.message, true); }
  }
  async purge() {
    const n = this.stats ? this.stats.visible + this.stats.inFlight + this.stats.delayed : null;
    const ok = await confirmAction("Purge " + this.name + "?",
      "This deletes every message in the queue" + (n !== null ? " (" + fmtInt(n) + " now)" : "") + ", ready, delayed and in flight. It cannot be undone.", "Purge");
    if (!ok) return;
    try {
      await api("POST", qpath(this.name) + "/purge");
      toast("Purged " + this.name + ".");
      if (this.tab === "messages") this.loadMessages();
    } catch (e) { toast("Purge failed: " + e.message, true); }
  }
  async deleteQueue() {
    const ok = await confirmAction("Delete the queue " + this.name + "?", "The queue and every message in it are deleted. It cannot be undone.", "Delete queue");
    if (!ok) return;
    // No read of the queue's consumers after the deletion: it would answer
    // 404.
    this.deleting = true;
    if (this.conLoad) await this.conLoad;
    try {
      await api("DELETE", qpath(this.name));
      deletedAt.set(this.name, Date.now());
      toast("Deleted the queue " + this.name + ".");
      location.hash = "#/";
    } catch (e) {
      this.deleting = false;
      toast("Delete failed: " + e.message, true);
    }
  }

  // --- consumers: the streams open on the queue, live ---
  buildConsumers() {
    this.conBody = h("tbody", { id: "consumer-rows" });
    this.conTable = h("table", { id: "consumers", hidden: true }, h("caption", { class: "sr" }, "Consumer streams"),
      h("thead", {}, h("tr", {}, ["Client", "Address", "Credit", "Held", "Acks/s", "Acked", "Connected since", "Last active"]
        .map((l, i) => h("th", { scope: "col", class: i >= 2 && i <= 5 ? "num" : null }, l)))),
      this.conBody);
    this.conEmpty = h("p", { class: "empty", id: "consumers-empty", hidden: true },
      "No consumer is connected. Consumers of the stream API (a Go program with package worker, or client/stream's Dial and Consume) are listed here while their stream is open; receives over HTTP or SQS hold no stream.");
    this.conNote = h("p", { class: "muted", id: "consumers-note" }, "Loading…");
    this.recBody = h("tbody", { id: "receiver-rows" });
    this.recTable = h("table", { id: "receivers", hidden: true }, h("caption", { class: "sr" }, "Recent receivers"),
      h("thead", {}, h("tr", {}, ["Access key", "Address", "User-Agent", "Receives", "Messages", "First", "Latest"]
        .map((l, i) => h("th", { scope: "col", class: i === 3 || i === 4 ? "num" : null }, l)))), this.recBody);
    this.recEmpty = h("p", { class: "empty", id: "receivers-empty", hidden: true }, "Nobody received over HTTP or SQS through this broker in the last 5 minutes.");
    return [h("div", { class: "bar" }, h("h2", {}, "Consumers"),
      h("span", { class: "muted" }, "Streams open on the queue: their credit, the messages they hold, their acks over the last ten seconds.")),
    this.conNote, h("div", { class: "scroll" }, this.conTable), this.conEmpty,
    h("div", { class: "bar" }, h("h3", {}, "Recent receivers"),
      h("span", { class: "muted" }, "Workers that poll over HTTP or SQS (no stream), by access key, host and User-Agent, in the last 5 minutes.")),
    h("div", { class: "scroll" }, this.recTable), this.recEmpty];
  }
  // loadConsumers reads GET /v1/queues/{queue}/consumers, at most one at a
  // time and once a second: the live data calls it each time it comes.
  // this.conLoad is the read in flight (a deletion waits for it).
  loadConsumers() {
    if (this.closed || this.deleting || this.conStopped || this.conLoad || Date.now() - (this.conAt || 0) < 900) return;
    this.conAt = Date.now();
    this.conLoad = this.readConsumers().finally(() => { this.conLoad = null; });
  }
  async readReceivers() {
    let doc;
    try { doc = await api("GET", qpath(this.name) + "/receivers"); } catch (e) {
      if (e.status === 404) this.recStopped = true;
      return;
    }
    if (this.closed || !this.recBody) return;
    const rs = doc.receivers || [];
    this.recBody.replaceChildren(...rs.map((r) => h("tr", {},
      h("td", { class: "mono" }, r.accessKey || "(unsigned)"), h("td", { class: "mono" }, r.remoteAddress),
      h("td", { class: "mono ua" }, r.userAgent || "—"), h("td", { class: "num" }, fmtInt(r.receives)), h("td", { class: "num" }, fmtInt(r.received)),
      h("td", {}, relTime(r.firstAt)), h("td", {}, relTime(r.lastAt)))));
    this.recTable.hidden = rs.length === 0;
    this.recEmpty.hidden = rs.length > 0;
  }
  async readConsumers() {
    if (this.recBody && !this.recStopped) await this.readReceivers();
    let doc;
    try {
      doc = await api("GET", qpath(this.name) + "/consumers");
    } catch (e) {
      // The queue gone is loadInfo's to say; a broker without the route
      // lists none.
      if (e.status === 404) this.conStopped = true;
      if (e.status === 404 && e.code === "no_such_route") {
        this.conUnsupported = true;
        setText(document.getElementById("stat-consumers"), "—");
        if (this.conNote) { this.conNote.hidden = false; setText(this.conNote, "This broker does not list its consumer streams."); }
      } else if (this.conNote) {
        this.conNote.hidden = false;
        setText(this.conNote, "Could not load the consumers: " + e.message);
      }
      return;
    }
    if (this.closed) return;
    const cs = doc.consumers || [];
    setText(document.getElementById("stat-consumers"), fmtInt(cs.length));
    if (!this.conBody) return;
    this.conNote.hidden = true;
    const now = this.brokerTime || Date.now();
    const old = new Map([...this.conBody.children].map((r) => [r.dataset.id, r]));
    const rows = cs.map((c) => {
      let row = old.get(c.id);
      if (!row) {
        row = h("tr", { "data-id": c.id },
          h("td", { "data-col": "client" }, h("span", { class: "qname" }), h("div", { class: "muted mono" }, c.id),
            h("div", { class: "muted mono", "data-col": "broker" })),
          ...["address", "credit", "held", "ackedPerSecond", "acked", "connectedAt", "lastActiveAt"].map((k, i) =>
            h("td", { "data-col": k, class: i >= 1 && i <= 4 ? "num" : (k === "address" ? "mono" : null) })));
      }
      const cell = (k) => row.querySelector('td[data-col="' + k + '"]');
      setText(cell("client").firstChild, c.clientName || "—");
      setText(row.querySelector('div[data-col="broker"]'), c.broker ? "on " + c.broker : "");
      setText(cell("address"), c.remoteAddress);
      setText(cell("credit"), fmtInt(c.credit));
      setText(cell("held"), fmtInt(c.held));
      setText(cell("ackedPerSecond"), fmtRate(c.ackedPerSecond));
      setText(cell("acked"), fmtInt(c.acked));
      setText(cell("connectedAt"), fmtTime(c.connectedAt));
      const idle = Math.max(0, (now - Date.parse(c.lastActiveAt)) / 1000);
      setText(cell("lastActiveAt"), isNaN(idle) ? "—" : fmtAge(idle) + " ago");
      return row;
    });
    this.conBody.replaceChildren(...rows);
    this.conTable.hidden = rows.length === 0;
    this.conEmpty.hidden = rows.length > 0;
  }

  // --- messages (browse) ---
  buildMessages() {
    this.sendForm();
    this.msgBody = h("tbody", { id: "message-rows" });
    this.msgTable = h("table", { id: "messages" }, h("caption", { class: "sr" }, "Messages"),
      h("thead", {}, h("tr", {}, ["Id", "State", "Body", "Receives", "Sent", ""].map((l, i) => h("th", { scope: "col", class: i === 3 ? "num" : null }, l)))),
      this.msgBody);
    this.msgEmpty = h("p", { class: "empty", hidden: true }, "No message in this queue.");
    this.msgMore = h("button", { type: "button", id: "messages-more", hidden: true, onclick: () => this.loadMessages(this.msgNext) }, "Load more");
    this.section.append(
      h("h2", {}, "Send a test message"), this.sendBox,
      h("div", { class: "bar" }, h("h2", {}, "Messages"), h("span", { class: "muted" }, "Browsing receives nothing: no lease is taken, no count moves."),
        h("span", { class: "grow" }), h("span", { class: "muted" }, "live: the first page is read every 2 s")),
      h("div", { class: "scroll" }, this.msgTable), this.msgEmpty, h("div", { class: "pager" }, this.msgMore));
    this.loadMessages();
  }
  async loadMessages(cursor) {
    if (this.msgLoading) return;
    this.msgLoading = true;
    let doc;
    try {
      doc = await api("GET", qpath(this.name) + "/messages?limit=50" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
    } catch (e) { toast("Could not browse the messages: " + e.message, true); return; } finally { this.msgLoading = false; }
    if (this.closed) return;
    if (cursor) this.msgPaged = true;
    // A row is kept while its message keeps its state and receive count,
    // and made again when either moved (so that the change shows).
    const old = new Map([...this.msgBody.children].map((r) => [r.dataset.id, r]));
    const rows = (doc.messages || []).map((m) => {
      const r = old.get(m.id);
      return r && r._key === stateKey(m) ? r : this.messageRow(m);
    });
    if (cursor) this.msgBody.append(...rows); else this.msgBody.replaceChildren(...rows);
    this.msgNext = doc.next || "";
    this.msgMore.hidden = !this.msgNext;
    this.msgEmpty.hidden = this.msgBody.children.length > 0;
    this.msgTable.hidden = this.msgBody.children.length === 0;
  }
  messageRow(m) {
    const del = h("button", { type: "button", class: "danger", "data-action": "delete-message" }, "Delete…");
    const row = h("tr", { "data-id": m.id, "data-state": stateOf(m) },
      h("td", { class: "mono id" }, msgLink(this.name, m.id), m.groupId ? h("div", { class: "muted" }, "group " + m.groupId) : null),
      h("td", { class: "state" }, stateCell(m)),
      h("td", {}, h("code", { class: "body" }, m.body), attrLine(m)),
      h("td", { class: "num" }, fmtInt(m.receiveCount), m.receiveCount > 1 ? h("div", { class: "tag redelivered", title: "delivered " + m.receiveCount + " times" }, "redelivered") : null),
      h("td", {}, relTime(m.createdAt)),
      h("td", { class: "actions" }, del));
    row._key = stateKey(m);
    del.addEventListener("click", async () => {
      const ok = await confirmAction("Delete this message?", "Message " + m.id + " is deleted whatever its state. It cannot be undone.", "Delete");
      if (!ok) return;
      try {
        await api("DELETE", qpath(this.name) + "/messages/" + encodeURIComponent(m.id));
        row.remove();
        toast("Deleted message " + m.id);
      } catch (e) { toast("Delete failed: " + e.message, true); }
    });
    return row;
  }

  // --- dead letters ---
  //
  // Two modes. On a source queue (one with a RedrivePolicy) the tab lists
  // the dead letters that came from it (GET .../dead-letters) and replays
  // them into it. On a dead-letter queue (one that some queue's
  // RedrivePolicy names, and that has none itself) it lists the messages the
  // queue holds (GET .../messages: each carries its source and failure
  // reason), replays each to the queue it came from, and deletes by id. Both
  // group the listed letters by failure reason, select them one by one, by
  // reason or all, and replay or delete the selection.
  buildDeadLetters() {
    this.selected = new Set();
    this.reasonFilter = null;
    this.dlBody = h("tbody", { id: "dead-letter-rows" });
    this.dlAll = h("input", { type: "checkbox", id: "dead-letters-select-all", "aria-label": "Select every dead letter shown" });
    this.dlAll.addEventListener("change", () => {
      for (const row of this.dlBody.children) if (!row.hidden) this.select(row.dataset.id, this.dlAll.checked);
      this.syncSelection();
    });
    this.dlHead = h("tr", {});
    this.dlTable = h("table", { id: "dead-letters" }, h("caption", { class: "sr" }, "Dead letters"), h("thead", {}, this.dlHead), this.dlBody);
    this.dlEmpty = h("p", { class: "empty", hidden: true, id: "dead-letters-empty" }, "No dead letter.");
    this.dlMore = h("button", { type: "button", id: "dead-letters-more", hidden: true, onclick: () => this.loadDeadLetters(this.dlNext) }, "Load more");
    this.dlGroups = h("div", { class: "groups", id: "dead-letter-groups", role: "group", "aria-label": "Failure reasons" });
    this.dlSelInfo = h("span", { class: "muted", id: "selection-info" });
    this.replaySel = h("button", { type: "button", id: "replay-selected", disabled: true, onclick: () => this.replay([...this.selected]) }, "Replay selected");
    this.deleteSel = h("button", { type: "button", id: "delete-selected", class: "danger", disabled: true, onclick: () => this.deleteLetters([...this.selected]) }, "Delete selected…");
    this.rate = h("input", { type: "number", id: "replay-rate", min: 1, max: 500, value: 500, "aria-label": "Replay rate, messages a second", class: "rate" });
    this.replayAll = h("button", { type: "button", id: "replay-all", class: "danger", onclick: () => this.replay(null) }, "Replay all…");
    this.dlNote = h("p", { class: "muted", id: "dead-letters-note", hidden: true });
    this.replays = h("tbody", { id: "replay-rows" });
    this.section.append(
      h("div", { class: "bar" }, h("h2", {}, "Dead letters"), h("span", { class: "grow" }),
        h("label", { class: "muted" }, "at ", this.rate, " /s"), this.replayAll),
      this.dlNote,
      this.dlGroups,
      h("div", { class: "bar" }, this.dlSelInfo, this.replaySel, this.deleteSel),
      h("div", { class: "scroll" }, this.dlTable), this.dlEmpty, h("div", { class: "pager" }, this.dlMore),
      h("h2", {}, "Replays"),
      h("table", { id: "replays" }, h("caption", { class: "sr" }, "Replays"),
        h("thead", {}, h("tr", {}, ["Started", "Status", "Moved", "To move", "Skipped", "From", "To", "Rate"].map((l) => h("th", { scope: "col" }, l)))), this.replays));
    this.ready.then(() => { if (!this.closed) { this.fillDeadLetterHead(); this.loadDeadLetters(); } });
  }
  // dlqMode: the tab lists the messages of this dead-letter queue.
  get dlqMode() { return !!(this.sources && this.sources.length && this.info && !this.info.deadLetterQueue); }
  fillDeadLetterHead() {
    const cols = ["", "Id", "Body", "Failure reason"].concat(this.dlqMode ? ["From"] : [], ["Receives", "Dead-lettered", ""]);
    this.dlHead.replaceChildren(...cols.map((l, i) => h("th", { scope: "col", class: l === "Receives" ? "num" : null }, i === 0 ? this.dlAll : l)));
    if (this.dlqMode && this.sources.length > 1) {
      this.replayAll.disabled = true;
      this.dlNote.hidden = false;
      setText(this.dlNote, "This dead-letter queue serves " + this.sources.join(", ") + ": select letters to replay each to the queue it came from.");
    }
  }
  // browse path of the listed letters, and the queue their deletes go to.
  get dlPath() { return this.dlqMode ? qpath(this.name) + "/messages" : qpath(this.name) + "/dead-letters"; }
  async loadDeadLetters(cursor) {
    if (this.dlLoading) return;
    this.dlLoading = true;
    let doc;
    try {
      doc = await api("GET", this.dlPath + "?limit=50" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
    } catch (e) {
      this.dlLoading = false;
      if (e.status === 409) {
        this.dlNoQueue = true;
        this.dlTable.hidden = true;
        this.replayAll.disabled = true;
        this.dlEmpty.hidden = false;
        setText(this.dlEmpty, "This queue has no dead-letter queue: set a RedrivePolicy to give it one.");
        return;
      }
      toast("Could not browse the dead letters: " + e.message, true);
      return;
    }
    this.dlLoading = false;
    if (this.closed) return;
    this.dlPaged = !!cursor || this.dlPaged;
    const msgs = doc.messages || [];
    const old = new Map([...this.dlBody.children].map((r) => [r.dataset.id, r]));
    const rows = msgs.map((m) => old.get(m.id) || this.deadLetterRow(m));
    if (cursor) this.dlBody.append(...rows); else this.dlBody.replaceChildren(...rows);
    // A selected letter gone (replayed, deleted, expired) is no longer selected.
    const present = new Set([...this.dlBody.children].map((r) => r.dataset.id));
    for (const id of [...this.selected]) if (!present.has(id)) this.selected.delete(id);
    this.dlNext = doc.next || "";
    this.dlMore.hidden = !this.dlNext;
    const n = this.dlBody.children.length;
    this.dlEmpty.hidden = n > 0;
    this.dlTable.hidden = n === 0;
    if (!(this.dlqMode && this.sources.length > 1)) this.replayAll.disabled = n === 0;
    this.fillGroups();
    this.syncSelection();
    this.loadReplays();
  }
  // fillGroups counts the listed letters by failure reason; a reason's
  // button shows only its letters, and selects them.
  fillGroups() {
    const counts = new Map();
    for (const row of this.dlBody.children) counts.set(row._reason, (counts.get(row._reason) || 0) + 1);
    if (this.reasonFilter !== null && !counts.has(this.reasonFilter)) this.reasonFilter = null;
    const groups = [...counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    const chip = (reason, n) => {
      const on = this.reasonFilter === reason;
      return h("button", { type: "button", class: "chip", "aria-pressed": on ? "true" : "false", "data-reason": reason === null ? null : reason,
        onclick: () => { this.filterReason(on ? null : reason); } },
      reason === null ? "All" : reason || "no reason given", " ", h("span", { class: "count" }, fmtInt(n)));
    };
    this.dlGroups.replaceChildren(h("span", { class: "muted" }, "By failure reason" + (this.dlNext ? " (the letters listed)" : "") + ":"),
      chip(null, this.dlBody.children.length), ...groups.map(([r, n]) => chip(r, n)));
    this.dlGroups.hidden = groups.length === 0;
    for (const row of this.dlBody.children) row.hidden = this.reasonFilter !== null && row._reason !== this.reasonFilter;
  }
  filterReason(reason) {
    this.reasonFilter = reason;
    // Showing one reason selects its letters, and nothing else.
    this.selected.clear();
    if (reason !== null) for (const row of this.dlBody.children) if (row._reason === reason) this.selected.add(row.dataset.id);
    this.fillGroups();
    this.syncSelection();
  }
  select(id, on) { if (on) this.selected.add(id); else this.selected.delete(id); }
  syncSelection() {
    let shown = 0, checked = 0;
    for (const row of this.dlBody.children) {
      const on = this.selected.has(row.dataset.id);
      row._check.checked = on;
      row.classList.toggle("selected", on);
      if (!row.hidden) { shown++; if (on) checked++; }
    }
    this.dlAll.checked = shown > 0 && checked === shown;
    this.dlAll.indeterminate = checked > 0 && checked < shown;
    const n = this.selected.size;
    setText(this.dlSelInfo, n ? fmtInt(n) + " selected" : "Select letters to replay or delete them together.");
    this.replaySel.disabled = n === 0;
    this.deleteSel.disabled = n === 0;
  }
  deadLetterRow(m) {
    const replay = h("button", { type: "button", "data-action": "replay" }, "Replay");
    const del = h("button", { type: "button", class: "danger", "data-action": "delete-dead-letter" }, "Delete…");
    const check = h("input", { type: "checkbox", "aria-label": "Select dead letter " + m.id });
    check.addEventListener("change", () => { this.select(m.id, check.checked); this.syncSelection(); });
    const from = m.deadLetterSource || "";
    const row = h("tr", { "data-id": m.id },
      h("td", {}, check),
      h("td", { class: "mono id" }, msgLink(this.name, m.id)),
      h("td", {}, h("code", { class: "body" }, m.body), attrLine(m)),
      h("td", { class: "reason" }, m.failureReason || "—"),
      this.dlqMode ? h("td", { class: "from" }, from ? h("a", { class: "qname", href: "#/queues/" + encodeURIComponent(from) }, from) : "—") : null,
      h("td", { class: "num" }, fmtInt(m.receiveCount)),
      h("td", {}, m.lastReceivedAt ? relTime(m.lastReceivedAt) : "—"),
      h("td", { class: "actions" }, replay, " ", del));
    row._check = check;
    row._reason = m.failureReason || "";
    row._source = from;
    replay.addEventListener("click", () => this.replay([m.id]));
    del.addEventListener("click", () => this.deleteLetters([m.id]));
    return row;
  }
  rowOf(id) { return this.dlBody.querySelector('tr[data-id="' + CSS.escape(id) + '"]'); }
  async deleteLetters(ids) {
    const one = ids.length === 1;
    const ok = await confirmAction(one ? "Delete this dead letter?" : "Delete " + fmtInt(ids.length) + " dead letters?",
      (one ? "Dead letter " + ids[0] + " is" : "The " + fmtInt(ids.length) + " selected dead letters are") + " deleted and will never be replayed. It cannot be undone.", "Delete");
    if (!ok) return;
    try {
      const path = this.dlqMode ? qpath(this.name) + "/messages/delete" : qpath(this.name) + "/dead-letters/delete";
      await api("POST", path, { ids });
      for (const id of ids) { const r = this.rowOf(id); if (r) r.remove(); this.selected.delete(id); }
      this.fillGroups();
      this.syncSelection();
      toast(one ? "Deleted dead letter " + ids[0] : "Deleted " + fmtInt(ids.length) + " dead letters.");
    } catch (e) { toast("Delete failed: " + e.message, true); }
  }
  // replay moves the chosen letters (ids), or all of them (null, after a
  // confirmation), back to the queue they came from.
  async replay(ids) {
    const rate = Math.min(500, Math.max(1, Number(this.rate.value) || 500));
    let target = this.name;
    if (!ids) {
      if (this.dlqMode) target = this.sources[0];
      const ok = await confirmAction("Replay every dead letter " + (this.dlqMode ? "of " + this.name + " to " + target : "of " + this.name) + "?",
        "Every dead letter moves back into " + target + " (" + fmtInt(rate) + " a second at most) and will be delivered again.", "Replay all");
      if (!ok) return;
    }
    // By source queue: a dead-letter queue's letters go back each to its own.
    const bySource = new Map();
    if (ids) {
      for (const id of ids) {
        const r = this.rowOf(id);
        const src = this.dlqMode ? (r && r._source) || this.sources[0] : this.name;
        if (!bySource.has(src)) bySource.set(src, []);
        bySource.get(src).push(id);
      }
    } else bySource.set(target, null);
    let moved = 0;
    try {
      for (const [src, list] of bySource) {
        const body = { maxPerSecond: rate };
        if (list) body.ids = list;
        const task = await api("POST", qpath(src) + "/dead-letters/replay", body);
        moved += task.toMove || 0;
        if (list) for (const id of list) { const r = this.rowOf(id); if (r) r.remove(); this.selected.delete(id); }
      }
      toast("Replay started: " + fmtInt(moved) + " to move.");
      this.fillGroups();
      this.syncSelection();
      this.loadReplays();
      setTimeout(() => { if (!this.closed) this.loadDeadLetters(); }, 1500);
    } catch (e) { toast("Replay failed: " + e.message, true); }
  }
  async loadReplays() {
    const from = this.dlqMode ? this.sources : [this.name];
    const all = [];
    for (const q of from) {
      try { all.push(...((await api("GET", qpath(q) + "/dead-letters/replays")).replays || [])); } catch (e) { /* none to show */ }
    }
    if (this.closed) return;
    all.sort((a, b) => (a.startedAt < b.startedAt ? 1 : -1));
    this.replays.replaceChildren(...all.map((r) => h("tr", {},
      h("td", {}, relTime(r.startedAt)), h("td", {}, r.status + (r.failureReason ? ": " + r.failureReason : "")),
      h("td", { class: "num" }, fmtInt(r.moved)), h("td", { class: "num" }, fmtInt(r.toMove)), h("td", { class: "num" }, fmtInt(r.skipped)),
      h("td", {}, r.source), h("td", {}, r.destination || "each its source"), h("td", { class: "num" }, fmtInt(r.maxPerSecond) + "/s"))));
    if (!this.replays.children.length) this.replays.append(h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No replay yet.")));
  }
  close() {
    this.closed = true;
    if (this.live) this.live.close();
    if (this.onResize) window.removeEventListener("resize", this.onResize);
  }
}

// msgLink links a message id to its page.
function msgLink(queue, id) {
  return h("a", { class: "msg-link", href: "#/queues/" + encodeURIComponent(queue) + "/messages/" + encodeURIComponent(id) }, id);
}

// stateOf names a browsed message's state as the dashboard shows it: a
// delayed message that was received before is backing off after a failure.
function stateOf(m) {
  if (m.state === "delayed" && m.receiveCount > 0) return "backingOff";
  return m.state || "";
}
const STATE_LABEL = { visible: "ready", inflight: "in flight", delayed: "delayed", backingOff: "backing off" };
function stateKey(m) { return stateOf(m) + "|" + m.receiveCount + "|" + (m.visibleAt || ""); }
// stateCell says the state and, relative to now, when it changes: "lease
// ends in 3 s", "retry in 4 s", "visible in 20 s".
function stateCell(m) {
  const st = stateOf(m);
  const label = h("span", { class: "state-label " + st }, STATE_LABEL[st] || st);
  if (!m.visibleAt || st === "visible") return [label];
  const prefix = { inflight: "lease ends ", backingOff: "retry ", delayed: "visible " }[st] || "until ";
  return [label, h("div", { class: "muted" }, relTime(m.visibleAt, prefix))];
}

// attrLine shows a message's attributes and correlation id under its body.
function attrLine(m) {
  const parts = [];
  if (m.correlationId) parts.push("correlation " + m.correlationId);
  if (m.priority) parts.push("priority " + m.priority);
  for (const [k, a] of Object.entries(m.attributes || {})) parts.push(k + "=" + (a && a.value !== undefined ? a.value : ""));
  return parts.length ? h("div", { class: "muted mono" }, parts.join(" · ")) : null;
}

// ---------- the overview ----------

// OverviewPage (#/overview) is the broker at a glance: GET /v1/overview
// (version, uptime, the store's room; read every 5 s) beside the live
// totals and throughput summed from GET /v1/stats.
class OverviewPage {
  constructor(main) {
    const card = (id, label) => h("div", { class: "card" }, h("div", { class: "label" }, label), h("div", { class: "value", id }, "—"));
    this.health = h("p", { class: "summary", id: "overview-health" }, "Loading…");
    this.store = h("dl", { class: "settings", id: "overview-store" });
    main.append(h("h1", {}, "Overview"), this.health,
      h("h2", {}, "Messages"),
      h("div", { class: "cards" }, card("ov-queues", "Queues"), card("ov-visible", "Visible"), card("ov-inflight", "In flight"),
        card("ov-delayed", "Delayed"), card("ov-deadletters", "Dead letters")),
      h("h2", {}, "Throughput (messages/s, last minute)"),
      h("div", { class: "cards" }, card("ov-sent", "Sent/s"), card("ov-received", "Received/s"), card("ov-deleted", "Deleted/s"),
        card("ov-nacked", "Nacked/s"), card("ov-deadlettered", "Dead-lettered/s")),
      h("h2", {}, "Broker and store"), this.store);
    this.live = new Live("", (doc) => this.update(doc));
    this.load();
  }
  update(doc) {
    const qs = doc.queues || [];
    const sum = (f) => qs.reduce((a, q) => a + (f(q) || 0), 0);
    setText(document.getElementById("ov-queues"), fmtInt(qs.length));
    setText(document.getElementById("ov-visible"), fmtInt(sum((q) => (q.isDeadLetterQueue ? 0 : q.visible))));
    setText(document.getElementById("ov-inflight"), fmtInt(sum((q) => q.inFlight)));
    setText(document.getElementById("ov-delayed"), fmtInt(sum((q) => q.delayed)));
    setText(document.getElementById("ov-deadletters"), fmtInt(sum((q) => (q.isDeadLetterQueue ? q.visible : 0))));
    for (const [id, k] of [["ov-sent", "sent"], ["ov-received", "received"], ["ov-deleted", "deleted"], ["ov-nacked", "nacked"], ["ov-deadlettered", "deadLettered"]]) {
      setText(document.getElementById(id), fmtRate(sum((q) => (q.rates ? q.rates[k] : 0))));
    }
    const bad = qs.filter((q) => q.health === "critical" || q.health === "warning");
    const kids = [fmtInt(qs.length) + " queues · " + qs.filter((q) => q.health === "critical").length + " critical · " +
      qs.filter((q) => q.health === "warning").length + " warning"];
    bad.slice(0, 8).forEach((q, i) => kids.push(i ? ", " : ": ", h("a", { class: "qname", href: "#/queues/" + encodeURIComponent(q.name) }, q.name), " (" + q.health + ")"));
    if (bad.length > 8) kids.push(", …");
    this.health.replaceChildren(...kids);
  }
  async load() {
    if (this.closed) return;
    try {
      const o = await api("GET", "/v1/overview");
      const rows = [["Version", o.version], ["Started", fmtTime(o.startedAt)], ["Uptime", fmtDuration(o.uptimeSeconds)]];
      if (o.store) {
        rows.push(["Store", o.store.kind === "postgres" ? "PostgreSQL" : "embedded (Pebble)"]);
        rows.push([o.store.kind === "postgres" ? "Database size" : "Store size", fmtBytes(o.store.sizeBytes), o.store.sizeBytes + " bytes"]);
        if (o.store.freeBytes !== undefined) rows.push(["Free disk", fmtBytes(o.store.freeBytes), o.store.freeBytes + " bytes"]);
        if (o.store.reserveBytes !== undefined) rows.push(["Sends refused below", fmtBytes(o.store.reserveBytes), o.store.reserveBytes + " bytes (--disk-reserve)"]);
      }
      if (o.pool) {
        rows.push(["Pool connections", o.pool.acquired + " in use, " + o.pool.idle + " idle, " + o.pool.total + " open of " + o.pool.max]);
        rows.push(["Pool waits", fmtInt(o.pool.emptyAcquires) + " of " + fmtInt(o.pool.acquires) + " acquires waited, " + fmtDuration(o.pool.acquireWaitSeconds) + " in all"]);
      }
      this.store.replaceChildren(...rows.flatMap(([k, v, raw]) => [h("dt", {}, k), h("dd", { title: raw || null, "data-key": k }, v)]));
    } catch (e) {
      this.store.replaceChildren(h("dt", {}, "Broker"), h("dd", {}, e.status === 404 ? "This broker has no overview route." : "Could not load: " + e.message));
      if (e.status === 404) return;
    }
    this.timer = setTimeout(() => this.load(), 5000);
  }
  close() { this.closed = true; clearTimeout(this.timer); this.live.close(); }
}

// ---------- a message ----------

// hasStatusRoute tells whether the broker serves a message's status (GET
// /v1/queues/{queue}/messages/{id}), from its OpenAPI document, read once:
// asking a broker without it would log a failed load in the console.
let statusRoute = null;
function hasStatusRoute() {
  if (!statusRoute) {
    statusRoute = api("GET", "/v1/openapi.json").then((d) => {
      const p = d && d.paths && d.paths["/v1/queues/{queue}/messages/{id}"];
      return !!(p && p.get);
    }, () => false);
  }
  return statusRoute;
}

// MessagePage (#/queues/NAME/messages/ID) shows one message: found by
// browsing the queue (and its dead letters), nothing received; its status
// from GET /v1/queues/NAME/messages/ID when the broker has that route.
class MessagePage {
  constructor(main, queue, id) {
    this.queue = queue;
    this.id = id;
    const base = "#/queues/" + encodeURIComponent(queue);
    this.body = h("div", { id: "message-detail" }, h("p", { class: "muted" }, "Looking for the message…"));
    this.status = h("section", { id: "message-status", hidden: true });
    main.append(
      h("p", { class: "muted" }, h("a", { href: "#/" }, "Queues"), " / ", h("a", { class: "qname", href: base }, queue), " / ", h("a", { href: base + "/messages" }, "messages")),
      h("h1", { class: "mono" }, id), this.status, this.body);
    this.load();
  }
  // find browses path for the message; this.more is set when the browse
  // stopped before the end.
  async find(path) {
    let cursor = "";
    for (let i = 0; i < 20 && !this.closed; i++) { // 2,000 messages at most
      const doc = await api("GET", path + "?limit=100" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
      const m = (doc.messages || []).find((x) => x.id === this.id);
      if (m) return m;
      if (!doc.next) return null;
      cursor = doc.next;
    }
    this.more = true;
    return null;
  }
  // load browses the queue, then its dead letters (only when it has a
  // dead-letter queue: else the route answers 409), and asks the status
  // route only where it can know the id: a message browsing found, one
  // past the 2,000 browsed, or a queue that keeps records of the messages
  // that left it (CompletedRetentionSeconds). Elsewhere it would answer
  // 404, which the browser logs as an error.
  async load() {
    let m = null, where = "messages", info;
    try {
      info = await api("GET", qpath(this.queue));
      m = await this.find(qpath(this.queue) + "/messages");
      if (!m && info.deadLetterQueue) {
        try { m = await this.find(qpath(this.queue) + "/dead-letters"); where = "dead-letters"; } catch (e) { if (e.status !== 409) throw e; }
      }
    } catch (e) {
      this.body.replaceChildren(h("p", { class: "empty" }, "Could not browse " + this.queue + ": " + e.message));
      return;
    }
    if (this.closed) return;
    if (m || this.more || Number((info.attributes || {}).CompletedRetentionSeconds) > 0) this.loadStatus();
    if (!m) {
      this.body.replaceChildren(h("p", { class: "empty", id: "message-missing" }, "No message " + this.id + " in " + this.queue + " or its dead letters (among the first 2,000): it may have been deleted, or delivered and acked."));
      return;
    }
    const rows = [["Queue", this.queue], ["State", where === "dead-letters" ? "dead-lettered (in " + (m.deadLetterSource ? "the dead-letter queue of " + m.deadLetterSource : "the dead-letter queue") + ")" : STATE_LABEL[stateOf(m)] || m.state],
      ["Receives", fmtInt(m.receiveCount)], ["Attempts", fmtInt(m.attempts) + (m.maxAttempts ? " of " + m.maxAttempts : "")],
      ["Sent", fmtTime(m.createdAt)], ["First received", fmtTime(m.firstReceivedAt)], ["Last received", fmtTime(m.lastReceivedAt)]];
    if (m.visibleAt) rows.push([stateOf(m) === "inflight" ? "Lease ends" : "Visible at", fmtTime(m.visibleAt)]);
    if (m.failureReason) rows.push(["Failure reason", m.failureReason]);
    if (m.deadLetterSource) rows.push(["Came from", m.deadLetterSource]);
    for (const [k, label] of [["priority", "Priority"], ["correlationId", "Correlation id"], ["traceContext", "Trace context (traceparent)"],
      ["groupId", "Group id"], ["dedupId", "Deduplication id"], ["sequenceNumber", "Sequence number"], ["ttlSeconds", "Time to live"]]) {
      if (m[k] !== undefined && m[k] !== "" && m[k] !== 0) rows.push([label, k === "ttlSeconds" ? fmtDuration(m[k]) : String(m[k])]);
    }
    const attrs = Object.entries(m.attributes || {});
    this.body.replaceChildren(
      h("dl", { class: "settings", id: "message-fields" }, ...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      h("h2", {}, "Body"), h("pre", { class: "body full", id: "message-body" }, m.body),
      h("h2", {}, "Attributes"),
      attrs.length ? h("table", { id: "message-attributes" }, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Name"), h("th", { scope: "col" }, "Type"), h("th", { scope: "col" }, "Value"))),
        h("tbody", {}, attrs.map(([k, a]) => h("tr", {}, h("td", { class: "mono" }, k), h("td", {}, a.type || ""), h("td", { class: "mono" }, a.value !== undefined ? String(a.value) : ""))))) : h("p", { class: "muted" }, "No attribute."));
  }
  // loadStatus reads the job status route; a broker without it (404
  // no_such_route, 405) shows no Status section.
  async loadStatus() {
    if (!(await hasStatusRoute())) return;
    let s;
    try { s = await api("GET", qpath(this.queue) + "/messages/" + encodeURIComponent(this.id)); } catch (e) { return; }
    if (this.closed || !s || !s.state) return;
    const rows = [["Status", s.state], ["Attempts", fmtInt(s.attempts)]];
    const at = (k, label, prefix) => { if (s[k]) rows.push([label, relTime(s[k], prefix)]); };
    at("visibleAt", "Visible", "");
    at("leaseEndsAt", "Lease ends", "");
    at("completedAt", "Completed", "");
    at("expiredAt", "Expired", "");
    if (s.deadLetterQueue) rows.push(["Dead-letter queue", h("a", { class: "qname", href: "#/queues/" + encodeURIComponent(s.deadLetterQueue) }, s.deadLetterQueue)]);
    if (s.reason) rows.push(["Reason", s.reason]);
    if (s.result !== undefined && s.result !== null) rows.push(["Result", h("code", { class: "body" }, s.result)]);
    if (s.replayedAs) rows.push(["Replayed as", h("a", { class: "mono", href: "#/queues/" + encodeURIComponent(this.queue) + "/messages/" + encodeURIComponent(s.replayedAs) }, s.replayedAs)]);
    const failures = s.failures || [];
    const history = failures.length ? [
      h("h3", {}, failures.length < (s.failureCount || 0) ? "Failures (the last " + failures.length + " of " + fmtInt(s.failureCount) + ")" : "Failures"),
      h("table", { id: "status-failures" }, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "When"), h("th", { scope: "col" }, "Reason"))),
        h("tbody", {}, failures.slice().reverse().map((f) => h("tr", {}, h("td", {}, relTime(f.at, "")), h("td", { class: "body" }, f.reason)))))] : [];
    this.status.replaceChildren(h("h2", {}, "Status"),
      h("dl", { class: "settings", id: "status-fields" }, ...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])), ...history);
    this.status.hidden = false;
  }
  close() { this.closed = true; }
}

// ---------- schedules ----------

// SchedulesPage (#/schedules) lists the schedules (GET /v1/schedules, every
// 5 s) with their next run relative to now, their latest run or error, and
// a Pause or Resume button each.
class SchedulesPage {
  constructor(main) {
    this.body = h("tbody", { id: "schedule-rows" });
    this.table = h("table", { id: "schedules" }, h("caption", { class: "sr" }, "Schedules"),
      h("thead", {}, h("tr", {}, ["Name", "Queue", "Schedule", "Next run", "Latest run", "Sent", ""].map((l) => h("th", { scope: "col", class: l === "Sent" ? "num" : null }, l)))), this.body);
    this.empty = h("p", { class: "empty", id: "schedules-empty", hidden: true }, "No schedule. Create one with POST /v1/schedules or sluice schedule create.");
    main.append(h("h1", {}, "Schedules"), h("p", { class: "muted" }, "Each schedule sends its message to its queue at every run. Pausing skips its runs until it is resumed."),
      h("div", { class: "scroll" }, this.table), this.empty);
    this.load();
  }
  async load() {
    if (this.closed) return;
    let all = [];
    try {
      let after = "";
      for (let i = 0; i < 10; i++) {
        const doc = await api("GET", "/v1/schedules?limit=500" + (after ? "&after=" + encodeURIComponent(after) : ""));
        all = all.concat(doc.schedules || []);
        if (!doc.next) break;
        after = doc.next;
      }
    } catch (e) {
      this.empty.hidden = false;
      setText(this.empty, e.status === 404 ? "This broker has no schedules." : "Could not load the schedules: " + e.message);
      this.timer = setTimeout(() => this.load(), 5000);
      return;
    }
    if (this.closed) return;
    this.body.replaceChildren(...all.map((s) => this.row(s)));
    this.table.hidden = all.length === 0;
    this.empty.hidden = all.length > 0;
    this.timer = setTimeout(() => this.load(), 5000);
  }
  row(s) {
    const btn = h("button", { type: "button", "data-action": s.paused ? "resume" : "pause" }, s.paused ? "Resume" : "Pause");
    btn.addEventListener("click", async () => {
      try {
        await api("POST", "/v1/schedules/" + encodeURIComponent(s.name) + "/" + (s.paused ? "resume" : "pause"));
        toast((s.paused ? "Resumed " : "Paused ") + s.name + ".");
        clearTimeout(this.timer);
        this.load();
      } catch (e) { toast("Could not change the schedule: " + e.message, true); }
    });
    const last = s.lastError ? h("span", { class: "error" }, "failed: " + s.lastError) : s.lastRun ? relTime(s.lastRun) : "never";
    return h("tr", { "data-schedule": s.name },
      h("td", { class: "qname" }, s.name, s.paused ? h("span", { class: "tag" }, "paused") : null),
      h("td", {}, h("a", { class: "qname", href: "#/queues/" + encodeURIComponent(s.queue) }, s.queue)),
      h("td", { class: "mono" }, s.schedule + (s.timeZone && s.timeZone !== "UTC" ? " (" + s.timeZone + ")" : "")),
      h("td", { class: "next" }, s.paused ? "paused" : s.nextRun ? relTime(s.nextRun) : "—"),
      h("td", {}, last),
      h("td", { class: "num" }, fmtInt(s.sent)),
      h("td", { class: "actions" }, btn));
  }
  close() { this.closed = true; clearTimeout(this.timer); }
}

// ---------- create a queue, edit its settings ----------

// The settings the forms offer, with their unit. The broker validates
// them: an error answer is shown with its message, as the API gives it.
const EDITABLE = [
  ["VisibilityTimeout", "s", "30"], ["MessageRetentionPeriod", "s", "345600"], ["DelaySeconds", "s", "0"],
  ["ReceiveMessageWaitTimeSeconds", "s", "0"], ["MaximumMessageSize", "bytes", "262144"], ["MaxDepth", "messages", ""],
];

// queueForm builds the fields of a queue's settings (values: its current
// attributes) and answers {el, read()}: read gives the attributes changed
// (all given ones when creating).
function queueForm(values, creating) {
  const inputs = new Map();
  const rows = EDITABLE.map(([k, unit, def]) => {
    const v = values[k] !== undefined ? values[k] : "";
    const input = h("input", { type: "text", inputmode: "numeric", id: "qf-" + k, name: k, value: v, placeholder: creating ? def : "", "aria-describedby": "qf-" + k + "-hint" });
    inputs.set(k, input);
    const hint = h("span", { class: "muted", id: "qf-" + k + "-hint" }, unit);
    const human = h("span", { class: "muted human" });
    const show = () => setText(human, humanAttr(k, input.value) ? "= " + humanAttr(k, input.value) : "");
    input.addEventListener("input", show);
    show();
    return h("div", { class: "field" }, h("label", { for: "qf-" + k }, k), input, hint, human);
  });
  let redrive = {};
  try { redrive = values.RedrivePolicy ? JSON.parse(values.RedrivePolicy) : {}; } catch (e) { redrive = {}; }
  const dlq = h("input", { type: "text", id: "qf-dlq", value: redrive.deadLetterTargetArn ? redrive.deadLetterTargetArn.split(":").pop() : "", placeholder: "none" });
  const mrc = h("input", { type: "text", inputmode: "numeric", id: "qf-max-receives", value: redrive.maxReceiveCount || "", placeholder: "5" });
  rows.push(h("div", { class: "field" }, h("label", { for: "qf-dlq" }, "Dead-letter queue"), dlq, h("span", { class: "muted" }, "after"), mrc, h("span", { class: "muted" }, "receives")));
  const read = (arnOf) => {
    const out = {};
    for (const [k, input] of inputs) {
      const v = input.value.trim();
      if (creating ? v !== "" : v !== (values[k] || "")) out[k] = v;
    }
    const d = dlq.value.trim();
    const old = redrive.deadLetterTargetArn ? redrive.deadLetterTargetArn.split(":").pop() : "";
    if (d !== old || String(mrc.value.trim()) !== String(redrive.maxReceiveCount || "")) {
      out.RedrivePolicy = d ? JSON.stringify({ deadLetterTargetArn: arnOf(d), maxReceiveCount: Number(mrc.value.trim() || 5) }) : "";
    }
    return out;
  };
  return { el: h("div", { class: "qform" }, rows), read, dlqName: () => dlq.value.trim() };
}

// formAttributes reads a queue form, the dead-letter queue's ARN asked of
// the broker (GET /v1/queues/NAME): a queue that does not exist is the
// API's own error.
async function formAttributes(form) {
  const d = form.dlqName();
  const arn = d ? (await api("GET", qpath(d))).arn : "";
  return form.read(() => arn);
}

// ---------- the flow: messages moving, live ----------

// Flow draws a queue's messages (the first 100 in send order, browsed
// every 2 s: nothing is received) in four lanes, ready, in flight, backing
// off (delayed after a receive) and delayed, plus the dead-letter count,
// and marks what happened since the previous read: a redelivery (its
// receive count rose) and a lease that ended without a delete (in flight
// before, ready or backing off now: the lease expired or the consumer
// nacked). The events list keeps the latest 20.
class Flow {
  constructor(page) {
    this.page = page;
    this.prev = new Map(); // id -> {state, receiveCount}
    this.lanes = {};
    const lane = (key, label) => {
      const dots = h("div", { class: "dots", id: "flow-" + key });
      const count = h("span", { class: "count" }, "0");
      this.lanes[key] = { dots, count };
      return h("div", { class: "lane " + key }, h("div", { class: "lane-head" }, label, " ", count), dots);
    };
    this.events = h("ol", { class: "events", id: "flow-events", "aria-live": "polite" });
    this.el = h("div", { class: "flow", id: "flow" },
      h("div", { class: "lanes" }, lane("visible", "Ready"), lane("inflight", "In flight"), lane("backingOff", "Backing off"), lane("delayed", "Delayed"),
        h("div", { class: "lane dead" }, h("div", { class: "lane-head" }, "Dead-lettered ", h("span", { class: "count", id: "flow-dead" }, "—")))),
      h("div", { class: "legend" }, h("span", { class: "mark redelivered" }, "redelivered (receive count > 1)"), h("span", { class: "mark expired" }, "lease ended without a delete")),
      h("h3", {}, "What happened"), this.events);
  }
  async read() {
    if (this.reading || this.page.closed) return;
    this.reading = true;
    let doc;
    try { doc = await api("GET", qpath(this.page.name) + "/messages?limit=100"); } catch (e) { this.reading = false; return; }
    this.reading = false;
    const now = new Map();
    const byLane = { visible: [], inflight: [], backingOff: [], delayed: [] };
    const evs = [];
    for (const m of doc.messages || []) {
      const st = stateOf(m);
      const was = this.prev.get(m.id);
      let mark = "";
      if (was && m.receiveCount > was.receiveCount && m.receiveCount > 1) { mark = "redelivered"; evs.push(["redelivered", m, "delivered again (receive " + m.receiveCount + ")"]); }
      if (was && was.state === "inflight" && st !== "inflight") { mark = mark || "expired"; evs.push(["expired", m, st === "backingOff" ? "lease ended: backing off, retry " : "lease ended: ready again"]); }
      if (!mark && m.receiveCount > 1) mark = "redelivered";
      now.set(m.id, { state: st, receiveCount: m.receiveCount });
      (byLane[st] || byLane.visible).push(h("a", { class: "dot " + mark, href: "#/queues/" + encodeURIComponent(this.page.name) + "/messages/" + encodeURIComponent(m.id),
        title: m.id + " · " + (STATE_LABEL[st] || st) + " · receives " + m.receiveCount, "aria-label": "message " + m.id }));
    }
    this.prev = now;
    for (const [k, l] of Object.entries(this.lanes)) { l.dots.replaceChildren(...byLane[k]); setText(l.count, byLane[k].length + (doc.next ? "+" : "")); }
    for (const [kind, m, text] of evs) {
      const li = h("li", { class: kind }, relTime(new Date(nowMs()).toISOString()), " ", msgLink(this.page.name, m.id), " " + text,
        kind === "expired" && m.visibleAt && stateOf(m) === "backingOff" ? relTime(m.visibleAt) : "");
      this.events.prepend(li);
    }
    while (this.events.children.length > 20) this.events.lastChild.remove();
    if (!this.events.children.length) this.events.append(h("li", { class: "muted", id: "flow-quiet" }, "Nothing yet: redeliveries and leases that end show here as they happen."));
    else { const q = this.events.querySelector("#flow-quiet"); if (q) q.remove(); }
  }
  update(q) {
    setText(document.getElementById("flow-dead"), q.deadLetters === null || q.deadLetters === undefined ? (q.isDeadLetterQueue ? "(this is one)" : "—") : fmtInt(q.deadLetters));
  }
}

window.addEventListener("hashchange", route);
route();
