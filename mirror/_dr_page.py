"""The DR status page (``GET /dr``): one HTML document with its CSS and JavaScript inline.

It needs no network but the admin API that serves it: no CDN, no web font, no image. The
script fetches ``v1/dr`` and each link's ``v1/links/<name>/lag-history`` (relative paths, so
the page also works behind a proxy that adds a path prefix) every ``REFRESH_MS`` and draws
everything with DOM calls (``textContent`` only: no value of the API is ever parsed as HTML).
``CONTENT_SECURITY_POLICY`` allows exactly this: fetches to the page's own origin, and the one
inline script and style block, pinned by their SHA-256 hashes.

For people: per link a big state and "RPO if you fail over now", a banner when the source is
unreachable or the link is failed over, the lag chart (inline SVG), the partitions, the DR state
and the failover journal, and "updated N s ago" in the header.

For tests and scripts: every number sits in an element with ``data-field="<name>"`` and its raw
JSON value in ``data-value`` ("" for null), inside ``section[data-link="<link>"]`` (link
fields) or ``tr[data-topic][data-partition]`` (partition fields). Fields of a link:
``link-state``, ``rpo-records``, ``rpo-bytes``, ``rpo-exact``, ``lag-records``, ``lag-seconds``,
``group-sync-age``, ``dr-state``, ``dr-epoch``, ``dr-primary``; of a partition: ``state``,
``source-end``, ``mirrored-end``, ``lag-records``, ``lag-seconds``, ``last-fetch``,
``rpo-records``, ``rpo-bytes``, ``rpo-exact``. Journal rows are ``tr[data-journal-seq]``.
``body[data-loaded]`` is set after the first answer was drawn; ``#page-error`` shows (and is
otherwise hidden and empty) any error of the script itself.
"""

from __future__ import annotations

import base64
import hashlib

__all__ = ["CONTENT_SECURITY_POLICY", "PAGE", "REFRESH_MS"]

REFRESH_MS = 5000

STYLE = """
:root { --bg: #f6f7f9; --fg: #111827; --muted: #4b5563; --card: #ffffff; --line: #d1d5db;
  --ok: #15803d; --ok-bg: #dcfce7; --warn: #92400e; --warn-bg: #fef3c7; --bad: #b91c1c; --bad-bg: #fee2e2;
  --info: #1e40af; --info-bg: #dbeafe; --chart-lag: #2563eb; --chart-rpo: #c2410c; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0b0f17; --fg: #e5e7eb; --muted: #9ca3af; --card: #111827; --line: #374151;
    --ok: #4ade80; --ok-bg: #052e16; --warn: #fcd34d; --warn-bg: #422006; --bad: #fca5a5; --bad-bg: #450a0a;
    --info: #93c5fd; --info-bg: #172554; --chart-lag: #60a5fa; --chart-rpo: #fb923c; }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 16px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 0.5rem 1.5rem; padding: 0.8rem 1.5rem;
  background: var(--card); border-bottom: 1px solid var(--line); }
header h1 { margin: 0; font-size: 1.35rem; }
header .who { color: var(--muted); }
#updated { margin-left: auto; font-weight: 600; }
#updated.stale { color: var(--bad); }
main { padding: 1rem 1.5rem 2rem; max-width: 1400px; }
.banner { margin: 0.6rem 0; padding: 0.7rem 1rem; border-radius: 6px; font-weight: 600; border-left: 6px solid; }
.banner.bad { background: var(--bad-bg); color: var(--bad); }
.banner.warn { background: var(--warn-bg); color: var(--warn); }
.banner.info { background: var(--info-bg); color: var(--info); }
section.link { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.25rem;
  margin-bottom: 1.5rem; }
section.link h2 { margin: 0 0 0.4rem; font-size: 1.5rem; }
section.link h2 .route { color: var(--muted); font-weight: 400; font-size: 1.1rem; margin-left: 0.6rem; }
h3 { margin: 1.2rem 0 0.4rem; font-size: 1.05rem; color: var(--muted); text-transform: uppercase;
  letter-spacing: 0.04em; }
.tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(180px, 1fr)); gap: 0.8rem; margin-top: 0.6rem; }
.tile { border: 1px solid var(--line); border-radius: 8px; padding: 0.7rem 0.9rem; }
.tile .label { color: var(--muted); font-size: 0.85rem; text-transform: uppercase; letter-spacing: 0.04em; }
.tile .big { font-size: 2rem; font-weight: 700; line-height: 1.2; font-variant-numeric: tabular-nums; }
.tile.words .big { font-size: 1.5rem; overflow-wrap: anywhere; }
.tile .sub { color: var(--muted); font-size: 0.9rem; }
.tile.rpo { grid-column: span 2; }
@media (min-width: 1000px) { .tiles { grid-template-columns: 1.3fr 2fr 1fr 1fr 1fr; } .tile.rpo { grid-column: auto; } }
.tile.rpo .big { font-size: 2.6rem; }
.big .unit { font-size: 1.1rem; font-weight: 600; margin-left: 0.35rem; }
.tile.ok { background: var(--ok-bg); color: var(--ok); border-color: var(--ok); }
.tile.warn { background: var(--warn-bg); color: var(--warn); border-color: var(--warn); }
.tile.bad { background: var(--bad-bg); color: var(--bad); border-color: var(--bad); }
.tile.info { background: var(--info-bg); color: var(--info); border-color: var(--info); }
.tile.ok .sub, .tile.warn .sub, .tile.bad .sub, .tile.info .sub, .tile.ok .label, .tile.warn .label,
.tile.bad .label, .tile.info .label { color: inherit; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 0.3rem 0.6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; font-size: 0.85rem; white-space: nowrap; }
td.n, th.n { text-align: right; }
td.detail { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 0.85rem; word-break: break-all; }
.state-active { color: var(--ok); font-weight: 700; }
.state-paused, .state-pending { color: var(--warn); font-weight: 700; }
.state-stopped { color: var(--info); font-weight: 700; }
.state-failed, .state-source-unavailable, .state-mirror-unreachable { color: var(--bad); font-weight: 700; }
.muted { color: var(--muted); }
svg.chart { width: 100%; max-width: 1000px; height: auto; display: block; }
svg.chart .axis { stroke: var(--line); stroke-width: 1; }
svg.chart text { fill: var(--muted); font-size: 12px; }
svg.chart .lag { fill: none; stroke: var(--chart-lag); stroke-width: 2.5; }
svg.chart .rpo { fill: var(--chart-rpo); }
svg.chart .legend-lag { fill: var(--chart-lag); font-weight: 700; }
svg.chart .legend-rpo { fill: var(--chart-rpo); font-weight: 700; }
#page-error { white-space: pre-wrap; }
footer { color: var(--muted); font-size: 0.85rem; padding: 0 1.5rem 1.5rem; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
"""

SCRIPT = r"""
"use strict";
const REFRESH_MS = __REFRESH_MS__;
const STALE_MS = 3 * REFRESH_MS;
const SVG_NS = "http://www.w3.org/2000/svg";
let lastGoodAt = null;   // Date.now() when the last answer was drawn
let fetchProblem = null; // why the last refresh failed, or null

function el(tag, attrs, ...children) {
  const svg = tag.startsWith("svg:");
  const node = svg ? document.createElementNS(SVG_NS, tag.slice(4)) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function raw(value) { return value === null || value === undefined ? "" : String(value); }
function field(name, value, text, cls) {
  return el("span", {"data-field": name, "data-value": raw(value), class: cls}, text);
}
function cell(name, value, text, cls) {
  return el("td", {"data-field": name, "data-value": raw(value), class: cls}, text);
}
function int(n) { return n === null || n === undefined ? "?" : Number(n).toLocaleString("en-US"); }
function bytes(n) {
  if (n === null || n === undefined) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(n), u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u += 1; }
  return u === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${units[u]}`;
}
function seconds(s) {
  if (s === null || s === undefined) return "?";
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}
function ago(ms, nowMs) {
  if (!ms) return "never";
  return `${seconds(Math.max(0, (nowMs - ms) / 1000))} ago`;
}
function clock(ms) {
  if (!ms) return "?";
  const d = new Date(ms), p = (x) => String(x).padStart(2, "0");
  const day = `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}`;
  return `${day} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// The server's "now" of a status, moved on by the time since it arrived: ages keep counting.
function serverNow(status) { return (status.at_ms || Date.now()) + (Date.now() - (lastGoodAt || Date.now())); }

function banners(s) {
  const out = [], name = s.link.name, dr = s.dr || {}, m = s.mirror || {};
  const failedOver = dr.reachable && dr.state && dr.state !== "mirroring";
  if (failedOver) {
    out.push(["info", "failed-over", `FAILED OVER: DR state ${dr.state}, epoch ${dr.epoch}; ${dr.primary} is the ` +
      `primary. This link copies nothing.`]);
  } else if (s.link_state === "stopped") {
    out.push(["info", "failed-over", "The mirror has FAILED OVER this link: it copies nothing."]);
  }
  if (s.source && !s.source.reachable) {
    out.push(["bad", "source-unreachable", `SOURCE ${s.source.name} IS UNREACHABLE: ${s.source.error}. ` +
      "Ends and RPO are the last values the mirror saw, and not exact." +
      (failedOver ? "" : ` If the site is lost: strait failover promote ${name} --unplanned`)]);
  }
  if (s.target && !s.target.reachable) {
    out.push(["bad", "target-unreachable", `TARGET ${s.target.name} IS UNREACHABLE: ${s.target.error}`]);
  }
  if (m.reachable === false) out.push(["bad", "mirror-unreachable", `The mirror does not answer: ${m.error}`]);
  else if (m.error) out.push(["bad", "link-failed", `The link failed: ${m.error}`]);
  if (m.last_sync_error) out.push(["warn", "sync-error", `Last topic sync failed: ${m.last_sync_error}`]);
  if (!dr.reachable) out.push(["warn", "dr-unknown", `DR state unknown: ${dr.error}`]);
  if (dr.operation) {
    const op = dr.operation;
    out.push(["warn", "operation", `In progress: ${op.name} (started ${clock(op.started_ms)} by ${op.by}; ` +
      `steps done: ${(op.done || []).join(", ") || "none"}). Running the same command again finishes it.`]);
  }
  const fence = m.fence || {};
  if (fence.state === "pending") {
    out.push(["warn", "fence-pending", `Fencing ${s.link.source} is pending` +
      (fence.last_error ? `: ${fence.last_error}` : " (waiting for it to answer)")]);
  }
  return out.map(([cls, kind, text]) => el("div", {class: `banner ${cls}`, role: "alert", "data-banner": kind}, text));
}

function tile(cls, label, big, ...sub) {
  return el("div", {class: `tile ${cls || ""}`}, el("div", {class: "label"}, label), el("div", {class: "big"}, big),
    sub.length ? el("div", {class: "sub"}, sub) : null);
}

function shout(state) { return (state || "?").replace(/-/g, " ").toUpperCase(); }

function records(name, value) {
  return el("span", {}, field(name, value, int(value)), el("span", {class: "unit"}, "records"));
}

function tiles(s, now) {
  const rows = s.partitions || [], rpo = s.rpo || {}, dr = s.dr || {}, m = s.mirror || {};
  const stateClass = {active: "ok", paused: "warn", stopped: "info"}[s.link_state] || "bad";
  const lastFetch = Math.max(0, ...rows.map((r) => r.last_fetch_ms || 0)) || null;
  const failedOver = dr.reachable && dr.state && dr.state !== "mirroring";
  const rpoClass = failedOver ? "info" : (rpo.records === 0 && rpo.exact ? "ok" : (rpo.exact ? "warn" : "bad"));
  const lag = rows.reduce((sum, r) => sum + (r.lag_records || 0), 0);
  const group = m.group_sync || {};
  const groupAge = group.last_sync_ms ? Math.max(0, (now - group.last_sync_ms) / 1000) : null;
  const atPromote = s.rpo_at_promote;
  return el("div", {class: "tiles"},
    tile(`${stateClass} words`, "Link state", field("link-state", s.link_state, shout(s.link_state)),
      `source ${s.source.name} ${s.source.reachable ? "reachable" : "UNREACHABLE"}`,
      ` · last fetch ${ago(lastFetch, now)}`),
    tile(`rpo ${rpoClass}`, failedOver ? "Left behind at the cut" : "RPO if you fail over now",
      records("rpo-records", rpo.records),
      field("rpo-bytes", rpo.bytes, bytes(rpo.bytes)), " · ",
      field("rpo-exact", rpo.exact, rpo.exact ? "exact" : "NOT exact (estimate)"),
      ` · ${rpo.partitions_behind || 0} of ${rpo.partitions || 0} partitions behind`,
      atPromote ? ` · at the promote: ${int(atPromote.records)} records, ${bytes(atPromote.bytes)}` : null,
      s.divergence ? ` · divergence exported: ${int(s.divergence.records)} records to ${s.divergence.dir}` : null),
    tile(lag ? "warn" : "ok", "Lag", records("lag-records", lag),
      field("lag-seconds", rpo.lag_seconds, `${seconds(rpo.lag_seconds)} behind`)),
    tile(group.last_error ? "bad" : "", "Group offsets synced",
      field("group-sync-age", groupAge === null ? null : Math.round(groupAge),
        groupAge === null ? "never" : `${seconds(groupAge)} ago`),
      `${group.groups || 0} groups · topics synced ${ago(m.last_sync_ms, now)}` +
      (group.last_error ? ` · ${group.last_error}` : "")),
    tile(failedOver ? "info words" : "words", "DR state",
      field("dr-state", dr.state, dr.reachable ? dr.state : "unknown"),
      dr.reachable ? el("span", {}, "epoch ", field("dr-epoch", dr.epoch, dr.epoch), " · primary ",
        field("dr-primary", dr.primary, dr.primary), ` · standby ${dr.standby}`) : "ZooKeeper of the target not read"));
}

function niceMax(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function chart(history, now) {
  const W = 960, H = 230, L = 70, R = 16, T = 24, B = 30;
  const svg = el("svg:svg", {class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": "lag in records over time", "data-points": history ? history.points.length : 0});
  const points = history ? history.points : [];
  if (!points.length) {
    svg.append(el("svg:text", {x: L, y: H / 2}, history ? `no samples yet (one every ${history.interval_s} s)` :
      "lag history not available"));
    return svg;
  }
  const t1 = Math.max(now, points[points.length - 1][0]);
  const t0 = Math.min(points[0][0], t1 - 60000);
  const top = niceMax(Math.max(...points.map((p) => Math.max(p[1], p[3] || 0))));
  const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0);
  const y = (v) => H - B - (H - T - B) * v / top;
  for (const v of [0, top / 2, top]) {
    svg.append(el("svg:line", {class: "axis", x1: L, x2: W - R, y1: y(v), y2: y(v)}));
    svg.append(el("svg:text", {x: L - 8, y: y(v) + 4, "text-anchor": "end"}, int(v)));
  }
  svg.append(el("svg:text", {x: L, y: H - 8}, `${seconds((t1 - t0) / 1000)} ago`));
  svg.append(el("svg:text", {x: W - R, y: H - 8, "text-anchor": "end"}, "now"));
  const line = points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
  svg.append(el("svg:polyline", {class: "lag", points: line}));
  for (const p of points) {
    if (p[3] === null) continue;
    svg.append(el("svg:circle", {class: "rpo", cx: x(p[0]).toFixed(1), cy: y(p[3]).toFixed(1), r: 3.5}));
  }
  const last = points[points.length - 1];
  svg.append(el("svg:text", {x: L, y: 14, class: "legend-lag"}, `— lag: ${int(last[1])} records, ${seconds(last[2])}`));
  svg.append(el("svg:text", {x: L + 330, y: 14, class: "legend-rpo"}, "● RPO measured"));
  return svg;
}

function partitions(s, now) {
  const head = el("tr", {}, ["topic", "partition", "state", "source end", "mirrored end", "lag", "lag s", "last fetch",
    "RPO records", "RPO bytes"].map((h, i) => el("th", {class: i === 0 || i === 2 || i === 7 ? "" : "n"}, h)));
  const rows = (s.partitions || []).map((r) => el("tr", {"data-topic": r.topic, "data-partition": r.partition},
    el("td", {}, r.topic), el("td", {class: "n"}, r.partition),
    cell("state", r.state, r.state, `state-${r.state}`),
    cell("source-end", r.source_end, int(r.source_end) + (r.source_end !== null && !r.source_end_live ?
      ` (seen ${ago(r.source_end_seen_ms, now)})` : ""), "n"),
    cell("mirrored-end", r.mirrored_end, int(r.mirrored_end), "n"),
    cell("lag-records", r.lag_records, int(r.lag_records), "n"),
    cell("lag-seconds", r.lag_seconds, seconds(r.lag_seconds), "n"),
    cell("last-fetch", r.last_fetch_ms, ago(r.last_fetch_ms, now)),
    cell("rpo-records", r.rpo_records, int(r.rpo_records) + (r.rpo_exact ? "" : " ~"), "n"),
    cell("rpo-bytes", r.rpo_bytes, bytes(r.rpo_bytes), "n"),
    el("td", {hidden: true, "data-field": "rpo-exact", "data-value": raw(r.rpo_exact)})));
  if (!rows.length) rows.push(el("tr", {}, el("td", {colspan: 10, class: "muted"}, "no mirrored partitions yet")));
  return el("table", {class: "partitions"}, el("thead", {}, head), el("tbody", {}, rows));
}

function journal(s) {
  const entries = ((s.dr || {}).journal || []).slice().reverse();
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
  const names = [`time (${zone})`, "step", "operation", "epoch", "by", "detail"];
  const head = el("tr", {}, names.map((h) => el("th", {}, h)));
  const rows = entries.map((e) => {
    const detail = JSON.stringify(e.detail || {});
    return el("tr", {"data-journal-seq": e.seq}, el("td", {}, clock(e.at_ms)), el("td", {}, e.step),
      el("td", {}, e.operation || "—"), el("td", {class: "n"}, e.epoch), el("td", {}, e.by || ""),
      el("td", {class: "detail", title: detail}, detail.length > 300 ? detail.slice(0, 300) + "…" : detail));
  });
  const none = "no failover command has run on this link";
  if (!rows.length) rows.push(el("tr", {}, el("td", {colspan: 6, class: "muted"}, none)));
  return el("table", {class: "journal"}, el("thead", {}, head), el("tbody", {}, rows));
}

function renderLink(s, history) {
  const now = serverNow(s), link = s.link || {};
  const section = el("section", {class: "link", "data-link": link.name, "data-link-state": s.link_state || "error",
    "data-at-ms": s.at_ms});
  const route = link.source ? el("span", {class: "route"}, `${link.source} → ${link.target}`) : null;
  section.append(el("h2", {}, link.name, route));
  if (s.error) {
    section.append(el("div", {class: "banner bad", role: "alert", "data-banner": "error"}, s.error));
    return section;
  }
  section.append(...banners(s), tiles(s, now));
  section.append(el("h3", {}, "Lag, last hour"), chart(history, now));
  section.append(el("h3", {}, "Partitions"), partitions(s, now));
  section.append(el("h3", {}, "Failover journal (newest first)"), journal(s));
  return section;
}

async function getJson(path) {
  const response = await fetch(path, {cache: "no-store", headers: {Accept: "application/json"}});
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new Error((body && body.detail) || `${path}: HTTP ${response.status}`);
  return body;
}

async function refresh() {
  try {
    const answer = await getJson("v1/dr");
    const histories = await Promise.all(answer.links.map((s) =>
      getJson(`v1/links/${encodeURIComponent(s.link.name)}/lag-history`).catch(() => null)));
    lastGoodAt = Date.now();
    fetchProblem = null;
    const main = document.getElementById("links");
    main.replaceChildren(...answer.links.map((s, i) => renderLink(s, histories[i])));
    if (!answer.links.length) main.append(el("p", {class: "muted"}, "This mirror runs no link."));
    document.getElementById("who").textContent = `mirror ${answer.member_id || "?"} · ${location.host}`;
    document.body.setAttribute("data-loaded", "");
  } catch (err) {
    fetchProblem = String(err && err.message ? err.message : err);
  } finally {
    tick();
    setTimeout(refresh, REFRESH_MS);
  }
}

function tick() {
  const updated = document.getElementById("updated"), problem = document.getElementById("problem");
  const age = lastGoodAt === null ? null : (Date.now() - lastGoodAt) / 1000;
  updated.textContent = age === null ? "not updated yet" : `updated ${seconds(age)} ago`;
  updated.setAttribute("data-age-s", age === null ? "" : age.toFixed(1));
  updated.classList.toggle("stale", age === null || age * 1000 > STALE_MS);
  problem.hidden = fetchProblem === null;
  problem.textContent = fetchProblem === null ? "" : `Cannot read the DR status: ${fetchProblem}` +
    (lastGoodAt === null ? "" : " (showing the last answer)");
}

function showPageError(text) {
  const box = document.getElementById("page-error");
  box.hidden = false;
  box.textContent += `page error: ${text}\n`;
}
window.addEventListener("error", (e) => showPageError(`${e.message} (${e.filename}:${e.lineno})`));
window.addEventListener("unhandledrejection", (e) => showPageError(String(e.reason)));
setInterval(tick, 1000);
refresh();
""".replace("__REFRESH_MS__", str(REFRESH_MS))

_BODY = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>strait DR status</title>
<link rel="icon" href="data:,">
<style>{style}</style>
</head>
<body data-refresh-ms="{refresh}">
<header><h1>strait DR status</h1><span class="who" id="who">mirror</span><span id="updated">loading…</span></header>
<main>
<noscript><div class="banner bad">This page needs JavaScript (inline, from this server only).
The same data as JSON: <a href="v1/dr">v1/dr</a>.</div></noscript>
<div id="page-error" class="banner bad" role="alert" hidden></div>
<div id="problem" class="banner bad" role="alert" hidden></div>
<div id="links"></div>
</main>
<footer>Refreshed every {seconds} s from <code>GET /v1/dr</code> and <code>GET /v1/links/&lt;link&gt;/lag-history</code>
of this mirror's admin API: the numbers of <code>strait failover status --json</code>. Read-only.</footer>
<script>{script}</script>
</body>
</html>
"""

PAGE = (  # the style and script go in last, exactly as hashed below
    _BODY.replace("{refresh}", str(REFRESH_MS))
    .replace("{seconds}", f"{REFRESH_MS / 1000:g}")
    .replace("{style}", STYLE)
    .replace("{script}", SCRIPT)
)


def _hash_source(text: str) -> str:
    """A CSP source expression allowing exactly the inline block ``text``."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "connect-src 'self'",
        f"script-src {_hash_source(SCRIPT)}",
        f"style-src {_hash_source(STYLE)}",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
