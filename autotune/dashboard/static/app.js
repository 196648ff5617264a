// autotune dashboard: a single page over the JSON endpoints under /api/ (autotune/dashboard/app.py).
// Routes live in the URL hash: #/ (campaigns), #/campaign/NAME, #/tasks, #/task/KEY, #/models; the lists keep their
// filter and page there too (#/?q=TEXT&page=N, #/tasks?q=TEXT&page=N).
"use strict";

const LIVE_MS = 10000;
let generation = 0;   // bumped on every route change: answers for an older page are dropped
let liveTimer = null;
let liveRefresh = null;  // the open page's refresh: the live timer calls it (and browser tests, not to wait 10 s)

// ---------------------------------------------------------------------------------------------
// helpers

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.suggestions = (body && body.suggestions) || [];
    this.candidates = (body && body.candidates) || [];  // the keys of the tasks an ambiguous name stands for
  }
}

async function api(path, params) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== null && v !== undefined && v !== "") qs.set(k, v);
  const resp = await fetch(`/api/${path}${qs.toString() ? "?" + qs : ""}`);
  let body = null;
  try { body = await resp.json(); } catch (e) { body = null; }
  if (!resp.ok) throw new ApiError(resp.status, body);
  return body;
}

function sig(x) {
  // x to 4 significant digits as Python's format(x, ".4g") writes it: no trailing zeros, 1.235e+05
  const r = Number(x.toPrecision(4));
  const e = r === 0 ? 0 : Math.floor(Math.log10(Math.abs(r)));
  if (e >= -4 && e < 4) return String(r);
  const [m, ex] = r.toExponential(3).split("e");
  return `${m.replace(/\.?0+$/, "")}e${ex[0] === "-" ? "-" : "+"}${ex.replace(/^[-+]/, "").padStart(2, "0")}`;
}
function fmtCost(v, kind) {
  // as the command line's tables write costs: seconds to 4 significant digits with a unit, rounded before the
  // unit is chosen (0.99996 s is "1 s"); the value a minimized function returned (a "function" task) has no
  // unit: the number alone
  if (v === null || v === undefined || !isFinite(v)) return "—";
  if (kind === "function") return sig(v);
  const r = Number(v.toPrecision(4));
  const a = Math.abs(r);
  if (a === 0) return "0 s";
  if (a >= 1e4) return `${r.toLocaleString("en-US", { maximumFractionDigits: 0 })} s`;
  if (a >= 1) return `${sig(r)} s`;
  if (a >= 1e-3) return `${sig(r * 1e3)} ms`;
  if (a >= 1e-6) return `${sig(r * 1e6)} µs`;
  return `${sig(r * 1e9)} ns`;
}
// a cost axis: in seconds unless the task minimized a function; logarithmic unless a cost is 0
const costAxis = (text, kind, ys) => ({ title: text === undefined ? undefined : { text: kind === "function" ? text : `${text} (s)` },
  type: ys.some((y) => y !== null && y <= 0) ? "linear" : "log", exponentformat: "SI" });
// costs a log can take, as autotune.cost_models.features.positive_costs reads them: a 0 (the best) as
// half the smallest positive cost (1 when every cost is 0), the others as they are
const positiveCosts = (cs) => {
  const floor = cs.reduce((m, c) => (c > 0 && c < m ? c : m), Infinity);
  return cs.map((c) => (c === 0 ? (isFinite(floor) ? floor / 2 : 1) : c));
};
const fmtInt = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"));
const fmtNum = (v, d = 3) => (v === null || v === undefined || !isFinite(v) ? "—"
  : Math.abs(v) >= 1000 ? Number(v).toLocaleString("en-US", { maximumFractionDigits: 0 }) : Number(v).toPrecision(d));
// a duration in seconds, written as costs in seconds are: 4 significant digits with a unit ("22.96 s", "990 ms")
const fmtSeconds = (s) => fmtCost(s);
const fmtTime = (t) => (t ? String(t).replace("T", " ").slice(0, 19) : "—");
const fmtBytes = (b) => (b === null || b === undefined ? "—" : `${(b / 2 ** 30).toFixed(2)} GiB`);

function statusTag(s) { return el("span", { class: `status ${s}` }, s); }
function campaignLink(name) { return el("a", { href: `#/campaign/${encodeURIComponent(name)}` }, name); }
function taskLink(key, label) { return el("a", { href: `#/task/${encodeURIComponent(key)}` }, label || key); }

function stepText(step) {
  // one rewrite of a graph candidate: [rule, where...] as rule(where)
  const where = step.slice(1).flat(Infinity).join(", ");
  return where ? `${step[0]}(${where})` : String(step[0]);
}
function isRewrites(c) { return Array.isArray(c) && c.every((s) => Array.isArray(s) && typeof s[0] === "string"); }
function isStrategy(c) { return c && typeof c === "object" && c.ops && typeof c.ops === "object" && !Array.isArray(c.ops); }

function configText(c) {
  // a candidate in one line: knobs as name=value, graph rewrites as rule(nodes) → ..., a parallel
  // strategy as op:degrees@first-device per operator
  if (isRewrites(c)) return c.length ? c.map(stepText).join(" → ") : "(the initial graph)";
  if (isStrategy(c)) {
    const head = Object.entries(c).filter(([k]) => k !== "ops").map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`);
    const ops = Object.entries(c.ops).map(([op, o]) => `${op}:${degreesText((o && o.degrees) || {})}@${(o && o.start) ?? 0}`);
    return [...head, ...ops].join(" ");
  }
  if (c && typeof c === "object" && !Array.isArray(c)) {
    return Object.entries(c).map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(" ");
  }
  return JSON.stringify(c);
}
function shorten(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }

function kpi(label, value) { return el("div", { class: "kpi" }, el("div", { class: "v" }, value), el("div", { class: "k" }, label)); }
function card(title, ...children) { return el("section", { class: "card" }, title ? el("h2", {}, title) : null, ...children); }
function note(text) { return el("p", { class: "note" }, text); }

function fill(target, ...children) {
  // replaceChildren without the null placeholders of conditional children
  target.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

function showError(target, err) {
  const box = el("div", { class: "error" }, err.message || String(err));
  if (err.suggestions && err.suggestions.length) {
    const link = /^unknown task/.test(err.message) ? (s) => taskLink(s) : campaignLink;
    box.append(el("div", {}, "Closest: ", ...err.suggestions.map((s, i) => [i ? ", " : "", link(s)])));
  }
  if (err.candidates && err.candidates.length) {
    box.append(el("div", {}, "One of: ", ...err.candidates.map((k, i) => [i ? ", " : "", taskLink(k)])));
  }
  target.replaceChildren(box);
}

// WebGL plots (parallel coordinates, slices) drawn at the screen's resolution, not Plotly's default of twice it:
// a quarter of the pixels where the screen does not need them (and where WebGL runs in software)
const PLOT_CONFIG = { responsive: true, displaylogo: false, plotGlPixelRatio: Math.min(2, Math.max(1, window.devicePixelRatio || 1)) };
function plot(div, traces, layout) {
  const base = {
    margin: { l: 60, r: 20, t: 30, b: 50 }, font: { size: 12 }, paper_bgcolor: "#fff", plot_bgcolor: "#fff",
    hovermode: "closest", showlegend: traces.length > 1, legend: { orientation: "h", y: -0.25 },
  };
  return Plotly.react(div, traces, Object.assign(base, layout || {}), PLOT_CONFIG);
}
// text from the database as Plotly shows it (axis titles and ticks, legends, hover labels), read literally:
// Plotly reads its own HTML subset there (<b>, <br>, &amp;...), so a parameter named <i>x</i> must reach it
// escaped. Never put such text in a hovertemplate either (its %{...} would be substituted): pass it as text.
function plain(text) { return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"); }
function plotDiv(id, tall) { return el("div", { id, class: tall ? "plot tall" : "plot" }); }

function table(headers, rows, attrs) {
  return el("div", { class: "table-wrap" }, el("table", attrs || {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { class: h.num ? "num" : null }, h.label || h)))),
    el("tbody", {}, rows)));
}

// ---------------------------------------------------------------------------------------------
// router

function route() {
  generation += 1;
  const gen = generation;
  if (liveTimer) { clearInterval(liveTimer); liveTimer = null; }
  liveRefresh = null;
  const hash = location.hash.replace(/^#/, "") || "/";
  const view = document.getElementById("view");
  // a list's filter and page follow a "?" (#/?q=TEXT&page=N, #/tasks?q=TEXT); a campaign's or task's name is
  // taken whole (any "?" in a link's name is encoded)
  const at = hash.indexOf("?");
  const head = (at < 0 ? hash : hash.slice(0, at)).split("/").filter((p) => p !== "");
  const named = head[0] === "campaign" || head[0] === "task";
  const parts = named ? hash.split("/").filter((p) => p !== "") : head;
  const query = new URLSearchParams(named || at < 0 ? "" : hash.slice(at + 1));
  const page = parts[0] || "campaigns";
  for (const a of document.querySelectorAll("header nav a")) {
    a.classList.toggle("active", a.dataset.nav === (page === "campaign" ? "campaigns" : page === "task" ? "tasks" : page));
  }
  // the old page's plots let go of their WebGL contexts (parallel coordinates, slices): the browser keeps but
  // a few, and past them drops the oldest, warning on the console
  for (const div of view.querySelectorAll(".js-plotly-plot")) {
    for (const canvas of div.querySelectorAll("canvas")) {
      const gl = canvas.getContext("webgl");  // the one Plotly made (null for a 2d canvas)
      const lose = gl && gl.getExtension("WEBGL_lose_context");
      if (lose) lose.loseContext();
    }
    Plotly.purge(div);
  }
  view.replaceChildren(el("p", { class: "muted" }, "loading…"));
  view.dataset.ready = "0";  // "1" once the page has drawn (browser tests wait for it)
  document.title = "autotune dashboard";
  let render;
  if (page === "campaign" && parts.length > 1) render = () => campaignPage(view, decodeURIComponent(parts.slice(1).join("/")), gen);
  else if (page === "task" && parts.length > 1) render = () => taskPage(view, decodeURIComponent(parts.slice(1).join("/")), gen);
  else if (page === "tasks") render = () => tasksPage(view, gen, query);
  else if (page === "models") render = () => modelsPage(view, gen);
  else render = () => campaignsPage(view, gen, query);
  render().then(() => { if (gen === generation) view.dataset.ready = "1"; })
    .catch((err) => { if (gen === generation) { showError(view, err); view.dataset.ready = "error"; } });
}

function live(fn) {
  // calls fn every LIVE_MS while the "live" box is ticked and this page is shown. A refresh that fails (the
  // campaign deleted or renamed, the database unreachable) says so above the page, which keeps what it
  // showed, until a refresh succeeds again
  const gen = generation;
  const view = document.getElementById("view");
  liveRefresh = () => fn().then(() => { if (gen === generation) liveFailed(view, null); },
    (err) => { if (gen === generation) liveFailed(view, err); });
  liveTimer = setInterval(() => {
    if (gen !== generation || !document.getElementById("live").checked || document.hidden) return;
    liveRefresh();
  }, LIVE_MS);
}

function liveFailed(view, err) {
  let box = document.getElementById("live-error");
  if (!err) { if (box) box.remove(); return; }
  if (!box) { box = el("div", { id: "live-error", class: "error" }); view.prepend(box); }
  box.replaceChildren(`The live refresh failed at ${new Date().toLocaleTimeString()} (the page below is as it was `
    + `before): ${err.message || err}`);
}

// ---------------------------------------------------------------------------------------------
// paged lists (campaigns, tasks): their filter and page live in the URL hash, so that Back from a campaign or a task
// returns to the same page of the list

const LIST_LIMIT = 50;

function listState(query) {
  // the filter and page a list opens on, from the hash's query (#/?q=TEXT&page=N), and the hash it shows (hash)
  const page = parseInt(query.get("page"), 10);
  return { q: (query.get("q") || "").trim(), offset: page > 1 ? (page - 1) * LIST_LIMIT : 0, limit: LIST_LIMIT,
    hash: location.hash };
}

function keepListState(path, state, gen) {
  // the list's filter and page written into the hash in place (replaceState: no new history entry, no reload). Only
  // while the hash is still the one the list shows: an answer that arrives after a link was followed, before its
  // hashchange ran, must not send the address back to the list
  if (gen !== generation || location.hash !== state.hash) return;
  const qs = new URLSearchParams();
  if (state.q) qs.set("q", state.q);
  if (state.offset > 0) qs.set("page", String(Math.floor(state.offset / state.limit) + 1));
  const hash = `#${path}${qs.toString() ? "?" + qs : ""}`;
  if (location.hash !== hash) history.replaceState(history.state, "", hash);
  state.hash = location.hash;
}

function listPager(pager, data, shown, state, load) {
  // Prev, "first–last of total" and Next under a list
  const first = data.total ? data.offset + 1 : 0;
  const last = data.offset + shown;
  pager.replaceChildren(
    el("button", { disabled: data.offset === 0, onclick: () => { state.offset = Math.max(0, state.offset - state.limit); load(); } }, "‹ Prev"),
    el("span", { class: "muted" }, `${fmtInt(first)}–${fmtInt(last)} of ${fmtInt(data.total)}`),
    el("button", { disabled: last >= data.total, onclick: () => { state.offset += state.limit; load(); } }, "Next ›"));
}

function pastTheEnd(data, shown, state) {
  // a page past the list's end (a page number from the hash, rows deleted since): the last page instead
  const lastPage = Math.floor(Math.max(0, data.total - 1) / state.limit) * state.limit;
  if (shown || !data.total || state.offset <= lastPage) return false;
  state.offset = lastPage;
  return true;
}

// ---------------------------------------------------------------------------------------------
// campaigns list

async function campaignsPage(view, gen, query) {
  const state = listState(query);
  const search = el("input", { type: "search", placeholder: "filter by name, task, device, algorithm", id: "campaign-search" });
  search.value = state.q;
  const body = el("div", { id: "campaigns" });
  const pager = el("div", { class: "pager", id: "campaigns-pager" });
  view.replaceChildren(el("h1", {}, "Campaigns"), card(null, el("div", { class: "toolbar" }, search), body, pager));
  let timer = null;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { state.q = search.value.trim(); state.offset = 0; load(); }, 250);
  });

  async function load() {
    const data = await api("campaigns", { q: state.q, offset: state.offset, limit: state.limit });
    if (gen !== generation) return;
    if (pastTheEnd(data, data.campaigns.length, state)) { await load(); return; }
    keepListState("/", state, gen);
    const rows = data.campaigns.map((c) => el("tr", {},
      el("td", {}, campaignLink(c.name)),
      el("td", {}, taskLink(c.task_key, c.task), " ", el("span", { class: "tag" }, c.task_kind)),
      el("td", {}, c.device),
      el("td", {}, c.algorithm),
      el("td", {}, statusTag(c.status)),
      el("td", { class: "num", title: c.complete ? null : "still reading this campaign's history" }, fmtInt(c.measured), c.complete ? "" : "…"),
      el("td", { class: "num" }, fmtInt(c.reused), c.complete ? "" : "…"),
      el("td", { class: "num" }, fmtInt(c.errors)),
      el("td", { class: "num" }, fmtCost(c.best_cost, c.task_kind)),
      el("td", { class: "num" }, fmtTime(c.updated))));
    body.replaceChildren(data.campaigns.length ? table(
      ["campaign", "task", "device", "algorithm", "status", { label: "measured", num: true },
        { label: "reused look-ups", num: true }, { label: "errors", num: true }, { label: "best cost", num: true },
        { label: "updated", num: true }], rows, { id: "campaign-table" })
      : note(state.q ? "no campaign matches" : "no campaign in this database yet"));
    listPager(pager, data, data.campaigns.length, state, load);
  }
  await load();
  live(load);
}

// ---------------------------------------------------------------------------------------------
// one campaign

async function campaignPage(view, name, gen) {
  const c = await api("campaign", { campaign: name });
  if (gen !== generation) return;
  document.title = `${c.name} · autotune`;
  const head = el("div", { id: "campaign-head" });
  const conv = { own: el("div", { id: "conv-trial-box" }), sim: el("div", { id: "conv-sim-box" }), wall: el("div", { id: "conv-wall-box" }) };
  const reusedBox = el("input", { type: "checkbox", id: "conv-reused" });
  const convCard = card("Convergence: best cost so far",
    el("div", { class: "toolbar" }, el("label", {}, reusedBox, " include reused look-ups (as trials at no simulated time)")),
    el("div", { class: "grid3" }, conv.own, conv.sim, conv.wall));
  const statusDiv = plotDiv("statuses");
  const tableCard = el("section", { class: "card", id: "trials-card" });
  const impDiv = el("div", { id: "importance-box" });
  const pcDiv = el("div", { id: "parcoords-box" });
  const sliceDiv = el("div", { id: "slices-box" });
  const modelsDiv = el("div", { id: "models-box" });
  const kindDiv = el("div", { id: "kind-box" });
  const staleBox = el("div", { id: "sample-stale" });  // says when the campaign has grown past the sample plots
  view.replaceChildren(
    head, convCard,
    el("div", { class: "grid" }, card("Trials by status", statusDiv), card("Parameter importance", impDiv)),
    tableCard, staleBox,
    card("Parallel coordinates (best trials and a random sample)", pcDiv),
    card("Slice plots: cost against each parameter", sliceDiv),
    kindDiv,
    card("Cost-model quality over retrains", modelsDiv),
    card("Options", el("pre", {}, JSON.stringify(c.options, null, 2))));

  renderHead(head, c);
  renderStatuses(statusDiv, c);
  let convData = await api("convergence", { campaign: name });
  if (gen !== generation) return;
  const drawConv = () => renderConvergence(conv, convData, reusedBox.checked, c.task_kind);
  reusedBox.addEventListener("change", drawConv);
  drawConv();
  const trials = trialTable(tableCard, c, gen);

  let sampled = c.evaluations;  // the campaign's evaluations when the sample plots were drawn
  const drawSample = () => Promise.all([api("sample", { campaign: name }), api("importance", { campaign: name })]).then(([s, imp]) => {
    if (gen !== generation) return;
    sampled = s.n;
    staleBox.replaceChildren();
    renderImportance(impDiv, imp);
    renderParcoords(pcDiv, s, imp, c.task_kind);
    renderSlices(sliceDiv, s, imp, c.task_kind);
  });
  // the views without a state of the user's (no brushed ranges), redrawn as the campaign grows
  const drawModels = () => api("cost-models", { campaign: name }).then((m) => { if (gen === generation) renderModels(modelsDiv, m.models, false); });
  const drawKind = c.task_kind === "graph" ? () => api("graph", { campaign: name }).then((g) => { if (gen === generation) renderGraph(kindDiv, g); })
    : c.task_kind === "parallel" ? () => api("parallel", { campaign: name }).then((p) => { if (gen === generation) renderParallel(kindDiv, p); })
      : null;
  const shown = (p) => p.catch((err) => { if (gen === generation) showError(kindDiv, err); });
  await Promise.all([drawSample(), drawModels(), drawKind && drawKind()].filter((p) => p).map(shown));

  let seen = c.evaluations;
  live(async () => {
    const [c2, conv2] = await Promise.all([api("campaign", { campaign: name }), api("convergence", { campaign: name })]);
    if (gen !== generation) return;
    renderHead(head, c2);
    renderStatuses(statusDiv, c2);
    convData = conv2;
    drawConv();
    if (c2.evaluations === seen) return;
    seen = c2.evaluations;
    trials.refresh(c2);  // the page shown, its count and any new status in the filter
    await Promise.all([drawModels(), drawKind && drawKind()].filter((p) => p));
    if (c2.evaluations !== sampled) {  // redrawn on request only: a redraw would drop the ranges dragged on the axes
      staleBox.replaceChildren(el("div", { class: "note card" },
        `The parameter importance, parallel coordinates and slice plots are drawn over ${fmtInt(sampled)} evaluations; `
        + `the campaign has ${fmtInt(c2.evaluations)} now. `,
        el("button", { id: "sample-redraw", onclick: () => drawSample().catch((err) => showError(staleBox, err)) }, "Redraw them")));
    }
  });
}

function renderHead(head, c) {
  const best = c.best || c.best_including_reused;
  fill(head,
    el("h1", {}, c.name, " ", statusTag(c.status)),
    el("div", { class: "muted" }, "task ", taskLink(c.task_key, c.task), ` (${c.task_kind}) · device ${c.device} · algorithm ${c.algorithm}`),
    el("div", { class: "kpis" },
      kpi("measured trials", fmtInt(c.measured)),
      kpi("reused look-ups", fmtInt(c.reused)),
      kpi("errors", fmtInt(c.errors)),
      kpi("best cost", fmtCost(c.best_cost, c.task_kind)),
      c.best_cost_including_reused !== c.best_cost ? kpi("best incl. reused", fmtCost(c.best_cost_including_reused, c.task_kind)) : null,
      chargesSimulatedTime(c.task_kind, c.simulated_s) ? kpi("simulated time", fmtSeconds(c.simulated_s)) : null,
      kpi("updated", fmtTime(c.updated))),
    c.complete ? null : el("div", { class: "note" }, `still reading this campaign's history (${fmtInt(c.evaluations)} evaluations so far): the figures fill in as the page refreshes`),
    c.transfer ? el("div", {}, el("b", {}, "transfer: "), `${c.transfer.algorithm} `,
      el("code", {}, JSON.stringify(c.transfer.options))) : null,
    best ? el("div", {}, el("b", {}, `best configuration (trial ${best.id}): `), el("code", { id: "best-config" }, shorten(configText(best.candidate), 600))) : null);
}

function renderStatuses(div, c) {
  const names = [...new Set([...Object.keys(c.statuses), ...Object.keys(c.reused_statuses)])].sort((a, b) => (a === "OK" ? -1 : b === "OK" ? 1 : a.localeCompare(b)));
  const colors = names.map((s) => (s === "OK" ? "#2e9d5b" : s === "INVALID" ? "#6a4fb5" : "#d2453d"));
  const traces = [{ type: "bar", name: "own trials", x: names, y: names.map((s) => c.statuses[s] || 0), marker: { color: colors } }];
  if (Object.keys(c.reused_statuses).length) {
    traces.push({ type: "bar", name: "reused look-ups", x: names, y: names.map((s) => c.reused_statuses[s] || 0), marker: { color: "#9aa6b8" } });
  }
  const counts = traces.flatMap((t) => t.y).filter((n) => n > 0);
  const wide = counts.length && Math.max(...counts) > 50 * Math.min(...counts);  // rare failures stay visible
  plot(div, traces, { barmode: "group", yaxis: { title: { text: wide ? "trials (log scale)" : "trials" }, type: wide ? "log" : "linear" },
    margin: { l: 60, r: 20, t: 20, b: 60 } });
}

// simulated time: what a replay charges each measurement (the compile and benchmark time its recording took). A
// replay shows it even at 0 (none charged yet); other kinds only when their runner charged some
function chargesSimulatedTime(kind, seconds) { return kind === "replay" || seconds > 0; }
function noSimulatedTime(kind) {
  // why the convergence by simulated time is empty, for the campaign's kind
  if (kind === "replay") return "no simulated time charged yet: a replay charges each measurement the compile and benchmark time its recording took";
  if (kind === "parallel") return "no simulated time: the simulator computes each strategy's iteration time (its cost) and charges "
    + "no time for the evaluation; see the convergence by trial and by wall time";
  if (kind === "graph") return "no simulated time: a graph search times each graph's ops on the device; see the convergence by wall time";
  return "no simulated time: this campaign's measurements ran for real and charge none (replays do); see the convergence by wall time";
}

function renderConvergence(divs, data, includeReused, kind) {
  const s = includeReused ? data.all : data.own;
  const axes = [
    [divs.own, "n", includeReused ? "evaluations" : "own trials", "by trial"],
    [divs.sim, "simulated_s", "simulated seconds", "by simulated time"],
    [divs.wall, "elapsed_s", "wall seconds since the first trial (trial created)", "by wall time"],
  ];
  for (const [box, key, label, title] of axes) {
    let div = box.querySelector(".plot");
    if (key === "simulated_s" && !(s.end.simulated_s > 0)) {
      if (div) Plotly.purge(div);
      fill(box, el("h2", {}, title), note(noSimulatedTime(kind)));
      continue;
    }
    if (!div) { div = plotDiv(`conv-${key}`); box.replaceChildren(div); }
    const pts = s.points.slice();
    const x = pts.map((p) => p[key]);
    const y = pts.map((p) => p.cost);
    if (pts.length) { x.push(s.end[key]); y.push(pts[pts.length - 1].cost); }
    const text = pts.map((p) => `trial ${p.trial} (#${p.n})<br>${fmtCost(p.cost, kind)}`);
    plot(div, [{ type: "scatter", mode: "lines+markers", line: { shape: "hv", color: "#2c6bd6" }, marker: { size: 6 },
      x, y, text, hovertemplate: "%{text}<extra></extra>", name: "best so far" }], {
      title: { text: title, font: { size: 13 } },
      xaxis: { title: { text: key === "n" && s.n > 1000 ? `${label} (log scale)` : label }, type: key === "n" && s.n > 1000 ? "log" : "linear" },
      yaxis: costAxis("best cost", kind, y),
      annotations: pts.length ? [] : [{ text: "no successful trial yet", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }],
    });
  }
}

// ---------------------------------------------------------------------------------------------
// the trial table: server-side keyset paging

function trialTable(cardEl, c, gen) {
  const statuses = [...new Set([...Object.keys(c.statuses), ...Object.keys(c.reused_statuses)])].sort();
  const state = { sort: "id", status: "", q: "", limit: 50, cursors: [null], page: 0, next: null };
  const sortSel = el("select", { id: "trials-sort" },
    el("option", { value: "id" }, "id ↑"), el("option", { value: "-id" }, "id ↓"),
    el("option", { value: "cost" }, "cost ↑ (fastest first)"), el("option", { value: "-cost" }, "cost ↓"));
  const statusSel = el("select", { id: "trials-status" }, el("option", { value: "" }, "all statuses"),
    statuses.map((s) => el("option", { value: s }, s)));
  const search = el("input", { type: "search", id: "trials-q", placeholder: "text in config or error, or name=value" });
  const prev = el("button", { id: "trials-prev" }, "‹ Prev");
  const next = el("button", { id: "trials-next" }, "Next ›");
  const info = el("span", { class: "muted", id: "trials-info" });
  const tbody = el("tbody");
  const tableEl = el("table", { id: "trials", "data-state": "loading", "data-page": "0" },
    el("thead", {}, el("tr", {}, ["id", "status", { label: "cost", num: true }, "configuration", "error",
      { label: "created", num: true }].map((h) => el("th", { class: h.num ? "num" : null }, h.label || h)))), tbody);
  cardEl.replaceChildren(el("h2", {}, "Trials"),
    el("div", { class: "toolbar" }, el("label", {}, "sort ", sortSel), statusSel, search),
    el("div", { class: "table-wrap" }, tableEl), el("div", { class: "pager" }, prev, info, next));

  let seq = 0;
  async function load() {
    const mine = ++seq;
    tableEl.dataset.state = "loading";
    prev.disabled = next.disabled = true;
    let data;
    try {
      data = await api("trials", { campaign: c.name, sort: state.sort, status: state.status, q: state.q,
        limit: state.limit, after: state.cursors[state.page] });
    } catch (err) {
      if (mine === seq && gen === generation) {
        tbody.replaceChildren(el("tr", {}, el("td", { colspan: 6, class: "err" }, err.message)));
        tableEl.dataset.state = "error";
      }
      return;
    }
    if (mine !== seq || gen !== generation) return;
    state.next = data.next;
    tbody.replaceChildren(...data.trials.map((t) => el("tr", {},
      el("td", {}, String(t.id), t.reused ? el("span", { class: "tag", title: "measured elsewhere, looked up" }, " reused") : null),
      el("td", {}, statusTag(t.status)),
      el("td", { class: "num" }, fmtCost(t.cost, c.task_kind)),
      el("td", { class: "config", title: configText(t.candidate) }, shorten(configText(t.candidate), 180)),
      el("td", { class: "err", title: t.error }, shorten(t.error || "", 80)),
      el("td", { class: "num" }, fmtTime(t.created)))));
    if (!data.trials.length) tbody.append(el("tr", {}, el("td", { colspan: 6, class: "note" }, data.partial ? "no match in this stretch of trials: Next looks further" : "no trial matches")));
    const count = data.count === null ? "many trials (count skipped for a text filter on a large campaign)"
      : `${fmtInt(data.count)}${data.count_exact ? "" : "+"} trials`;
    const first = state.page * state.limit + 1;
    info.textContent = `page ${state.page + 1} · rows ${fmtInt(first)}–${fmtInt(first + data.trials.length - 1)} · ${count}${data.partial ? " · partial page (scan limit)" : ""}`;
    prev.disabled = state.page === 0;
    next.disabled = !data.next;
    tableEl.dataset.page = String(state.page + 1);
    tableEl.dataset.state = "ready";
  }
  function restart() { state.cursors = [null]; state.page = 0; load(); }
  sortSel.addEventListener("change", () => { state.sort = sortSel.value; restart(); });
  statusSel.addEventListener("change", () => { state.status = statusSel.value; restart(); });
  let timer = null;
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => { state.q = search.value.trim(); restart(); }, 300); });
  next.addEventListener("click", () => {
    if (!state.next) return;
    state.cursors = state.cursors.slice(0, state.page + 1);
    state.cursors.push(state.next);
    state.page += 1;
    load();
  });
  prev.addEventListener("click", () => { if (state.page > 0) { state.page -= 1; load(); } });
  load();
  return {
    refresh(c2) {  // the campaign moved on: the same page again (its cursor), with the statuses it has now
      const have = new Set([...statusSel.options].map((o) => o.value));
      for (const s of [...new Set([...Object.keys(c2.statuses), ...Object.keys(c2.reused_statuses)])].sort()) {
        if (!have.has(s)) statusSel.append(el("option", { value: s }, s));
      }
      load();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// sample plots: importance, parallel coordinates, slices

function orderedDims(sample, imp) {
  const rank = new Map((imp.params || []).map((p, i) => [p.name, i]));
  return sample.params.slice().sort((a, b) => (rank.has(a.name) ? rank.get(a.name) : 1e9) - (rank.has(b.name) ? rank.get(b.name) : 1e9));
}

function renderImportance(div, imp) {
  if (!imp.params.length) { div.replaceChildren(note(`too few successful trials to estimate (${imp.n})`)); return; }
  const top = imp.params.slice(0, 20).reverse();
  const p = plotDiv("importance");
  // main effects are computed one parameter at a time: parameters that vary together in the sample (a constrained
  // space, a search that favours some combinations) are each credited with what they explain together
  const sum = imp.params.reduce((a, r) => a + r.share, 0);
  div.replaceChildren(p, el("div", { class: "muted", id: "importance-note" },
    `share of the variance of log cost explained by each parameter alone (main effects, fANOVA-style), over ${fmtInt(imp.n)} sampled successful trials. `
    + "Each share is computed one parameter at a time: where the sample's parameters are correlated, each is credited "
    + "with what they explain together, so the shares can add up to more than 100%"
    + (sum > 1.005 ? ` (here ${Math.round(sum * 100)}%).` : ".")));
  plot(p, [{ type: "bar", orientation: "h", x: top.map((r) => r.share), y: top.map((r) => plain(r.name)), marker: { color: "#2c6bd6" },
    hovertemplate: "%{y}: %{x:.1%}<extra></extra>" }], { xaxis: { title: { text: "variance share" }, tickformat: ".0%" },
    yaxis: { automargin: true }, margin: { l: 20, r: 20, t: 10, b: 50 } });
}

function levels(trials, d) {
  // the sorted distinct values of a parameter in the sample, when few enough to show each (else null)
  const vs = [...new Set(trials.map((t) => t.params[d.name]).filter((v) => v !== undefined && v !== null))];
  if (!d.numeric) return vs.map(String).sort();
  return vs.length <= 16 ? vs.sort((a, b) => a - b) : null;
}

function renderParcoords(div, sample, imp, kind) {
  const ok = sample.trials.filter((t) => t.cost !== null && t.cost >= 0);
  const dims = orderedDims(sample, imp).slice(0, 10);
  if (ok.length < 2 || !dims.length) { div.replaceChildren(note("not enough successful trials with varying parameters")); return; }
  const p = plotDiv("parcoords", true);
  const nBest = ok.filter((t) => t.best).length;
  const what = sample.trials.length >= sample.n ? `all ${fmtInt(ok.length)} successful trials`
    : `${fmtInt(ok.length)} successful trials: the ${fmtInt(nBest)} best and a random sample of the ${fmtInt(sample.n)}`;
  div.replaceChildren(p, el("div", { class: "muted" }, `${what}; colour: log10 cost (darker is faster); drag on an axis to filter`));
  const dimensions = dims.map((d) => {
    const vals = levels(ok, d);
    if (!vals) return { label: plain(d.name), values: ok.map((t) => (t.params[d.name] === undefined ? NaN : t.params[d.name])) };
    const index = new Map(vals.map((v, i) => [String(v), i]));  // one evenly spaced position per value
    return { label: plain(d.name), values: ok.map((t) => index.get(String(t.params[d.name])) ?? NaN),
      tickvals: vals.map((_, i) => i), ticktext: vals.map((v) => shorten(String(v), 12)) };  // ticks are plain text here
  });
  const logc = positiveCosts(ok.map((t) => t.cost)).map(Math.log10);
  dimensions.push({ label: "log10 cost", values: logc });
  plot(p, [{ type: "parcoords", dimensions, line: { color: logc, colorscale: "Viridis", showscale: true,
    colorbar: { title: { text: kind === "function" ? "log10 cost" : "log10 s" } } } }], { margin: { l: 70, r: 70, t: 50, b: 30 } });
}

function renderSlices(div, sample, imp, kind) {
  const ok = sample.trials.filter((t) => t.cost !== null && t.cost >= 0);
  const dims = orderedDims(sample, imp).slice(0, 6);
  if (!ok.length || !dims.length) { div.replaceChildren(note("not enough successful trials with varying parameters")); return; }
  const whole = sample.trials.length >= sample.n;
  const p = plotDiv("slices", true);
  div.replaceChildren(p);
  const cols = Math.min(3, dims.length);
  const rows = Math.ceil(dims.length / cols);
  const traces = [];
  const layout = { grid: { rows, columns: cols, pattern: "independent" }, showlegend: true, margin: { l: 60, r: 20, t: 30, b: 40 } };
  p.style.height = `${Math.max(320, rows * 260)}px`;
  dims.forEach((d, i) => {
    const ax = i === 0 ? "" : String(i + 1);
    const vals = levels(ok, d);  // few values: one category each, in order
    for (const best of [false, true]) {
      const pts = ok.filter((t) => t.best === best && t.params[d.name] !== undefined);
      if (!pts.length) continue;
      traces.push({ type: "scattergl", mode: "markers", xaxis: `x${ax}`, yaxis: `y${ax}`,
        name: best ? "best trials" : (whole ? "trials" : "random sample"),
        legendgroup: best ? "best" : "random", showlegend: i === 0,
        x: pts.map((t) => (vals ? plain(t.params[d.name]) : t.params[d.name])), y: pts.map((t) => t.cost),
        marker: { size: 5, opacity: best ? 0.9 : 0.45, color: best ? "#d2453d" : "#2c6bd6" },
        text: pts.map((t) => `trial ${t.id}<br>${fmtCost(t.cost, kind)}<br>${plain(d.name)}=${plain(t.params[d.name])}`),
        hovertemplate: "%{text}<extra></extra>" });
    }
    layout[`xaxis${ax}`] = vals ? { title: { text: plain(d.name), font: { size: 11 } }, type: "category", categoryorder: "array",
      categoryarray: vals.map(plain) } : { title: { text: plain(d.name), font: { size: 11 } } };
    layout[`yaxis${ax}`] = costAxis(i % cols === 0 ? "cost" : undefined, kind, ok.map((t) => t.cost));  // linear with a 0
  });
  plot(p, traces, layout);
}

// ---------------------------------------------------------------------------------------------
// cost models

function renderModels(div, models, byCampaign) {
  const withMetrics = models.filter((m) => m.metrics && (m.metrics.spearman !== undefined || m.metrics.top_k_recall !== undefined));
  if (!models.length) { div.replaceChildren(note("no stored cost model (campaigns run with a cost model store one per retrain)")); return; }
  const p = plotDiv(byCampaign ? "models-plot" : "campaign-models");
  const summary = el("div", { class: "muted" }, `${fmtInt(models.length)} retrains stored; ${fmtInt(withMetrics.length)} with held-out metrics`);
  const groups = new Map();
  for (const m of withMetrics) {
    const key = byCampaign ? (m.campaign || `${m.task} on ${m.device}`) : m.model;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(m);
  }
  const traces = [];
  for (const [key, ms] of groups) {
    const label = byCampaign ? plain(shorten(key, 40)) : "";
    traces.push({ type: "scatter", mode: "lines+markers", name: `${label} Spearman`.trim(), x: ms.map((m) => m.n_samples),
      y: ms.map((m) => m.metrics.spearman ?? null), text: ms.map((m) => `model ${m.id} · ${fmtTime(m.created)}`),
      hovertemplate: "%{text}<br>n=%{x}: %{y:.3f}<extra></extra>" });
    traces.push({ type: "scatter", mode: "lines+markers", name: `${label} top-k recall`.trim(), line: { dash: "dot" },
      x: ms.map((m) => m.n_samples), y: ms.map((m) => m.metrics.top_k_recall ?? null),
      text: ms.map((m) => `model ${m.id} · k=${m.metrics.k ?? "?"}`), hovertemplate: "%{text}<br>n=%{x}: %{y:.3f}<extra></extra>" });
  }
  const last = models[models.length - 1];
  const rows = models.slice(-12).reverse().map((m) => el("tr", {},
    el("td", { class: "num" }, String(m.id)), el("td", {}, m.model), byCampaign ? el("td", {}, m.campaign ? campaignLink(m.campaign) : "—") : null,
    el("td", { class: "num" }, fmtInt(m.n_samples)), el("td", { class: "num" }, fmtNum(m.metrics.spearman)),
    el("td", { class: "num" }, fmtNum(m.metrics.top_k_recall)), el("td", { class: "num" }, fmtTime(m.created))));
  const headers = [{ label: "id", num: true }, "model", byCampaign ? "campaign" : null, { label: "samples", num: true },
    { label: "Spearman", num: true }, { label: "top-k recall", num: true }, { label: "created", num: true }].filter((h) => h);
  div.replaceChildren(summary, traces.length ? p : note("no retrain has held-out metrics yet"),
    el("div", { class: "muted" }, `latest: ${last.model} on ${fmtInt(last.n_samples)} samples`),
    table(headers, rows, { id: byCampaign ? "models-table" : "campaign-models-table" }));
  if (traces.length) {
    plot(p, traces, { xaxis: { title: { text: "training samples" } }, yaxis: { title: { text: "held-out quality" }, range: [-1.05, 1.05] },
      showlegend: true });
  }
}

// ---------------------------------------------------------------------------------------------
// graph rewrites and parallel strategies

function renderGraph(div, g) {
  if (!g.best) { div.replaceChildren(card("Graph rewrites", note("no successful graph yet"))); return; }
  const counts = plotDiv("graph-rules");
  const usage = plotDiv("graph-usage");
  const steps = g.best.steps.map((s, i) => el("tr", {}, el("td", { class: "num" }, String(i + 1)), el("td", {}, s[0]),
    el("td", { class: "config" }, shorten(s.slice(1).flat(Infinity).join(", "), 200))));
  const speedup = g.initial && g.initial.cost ? ` · ${fmtNum(g.initial.cost / g.best.cost, 3)}× faster than the initial graph (${fmtCost(g.initial.cost)})` : "";
  div.replaceChildren(card("Graph rewrites",
    el("div", { class: "muted" }, `best graph: trial ${g.best.trial}, ${fmtCost(g.best.cost)}, ${g.best.steps.length} rewrites${speedup}`),
    el("div", { class: "grid" }, counts, usage),
    g.best.steps.length ? table([{ label: "#", num: true }, "rule", "applied at"], steps, { id: "graph-steps" }) : note("the best graph is the initial graph")));
  const rc = Object.entries(g.best.rule_counts);
  plot(counts, [{ type: "bar", x: rc.map((r) => plain(r[0])), y: rc.map((r) => r[1]), marker: { color: "#2c6bd6" } }],
    { title: { text: "rules applied in the best graph", font: { size: 13 } }, yaxis: { title: { text: "applications" } } });
  const ru = Object.entries(g.top_rule_usage);
  plot(usage, [{ type: "bar", x: ru.map((r) => plain(r[0])), y: ru.map((r) => r[1]), marker: { color: "#2e9d5b" } }],
    { title: { text: `rules used by the ${g.top_n} best graphs`, font: { size: 13 } }, yaxis: { title: { text: "graphs" } } });
}

// an operator's parallel degrees as dimension=degree ("b=16·a0=2"), "1" when it is not split
function degreesText(d) { return Object.entries(d).map(([k, v]) => `${k}=${v}`).join("·") || "1"; }

function renderParallel(div, p) {
  if (!p.best) { div.replaceChildren(card("Parallel strategy", note("no successful strategy yet"))); return; }
  const layoutDiv = plotDiv("parallel-layout", true);
  const timelineDiv = plotDiv("parallel-timeline", true);
  const m = p.best.meta || {};
  div.replaceChildren(card("Parallel strategy",
    el("div", { class: "kpis" }, kpi("best iteration time", fmtCost(p.best.cost)), kpi("devices", fmtInt(p.best.devices)),
      kpi("peak memory per device", fmtBytes(m.peak_memory_bytes)), kpi("device memory", fmtBytes(m.capacity_bytes)),
      kpi("throughput", m.throughput ? `${fmtNum(m.throughput, 4)} samples/s` : "—")),
    el("div", { class: "muted" }, "The trials hold each strategy's layout (per-operator parallel degrees and first device), not a per-device time breakdown: the charts show the layout."),
    el("div", { class: "grid" }, layoutDiv, timelineDiv)));
  const L = p.best.layout.slice().reverse();
  plot(layoutDiv, [{ type: "bar", orientation: "h", y: L.map((o) => plain(o.op)), x: L.map((o) => o.devices), base: L.map((o) => o.start),
    text: L.map((o) => plain(degreesText(o.degrees))), textposition: "inside", marker: { color: L.map((o) => Math.log2(o.devices)), colorscale: "Blues", reversescale: true, cmin: 0, cmax: Math.log2(p.best.devices || 2) + 1 },
    hovertemplate: "%{y}: devices %{customdata[0]}–%{customdata[1]}<br>degrees %{text}<extra></extra>",
    customdata: L.map((o) => [o.start, o.end]) }],
  { title: { text: `best strategy (trial ${p.best.trial}): devices per operator`, font: { size: 13 } },
    xaxis: { title: { text: "device" }, range: [0, p.best.devices || undefined], dtick: 1 }, margin: { l: 110, r: 20, t: 40, b: 50 } });
  const ops = p.best.layout.map((o) => o.op);
  const z = p.timeline.map((t) => ops.map((op) => { const o = t.layout.find((x) => x.op === op); return o ? o.devices : null; }));
  const text = p.timeline.map((t) => ops.map((op) => { const o = t.layout.find((x) => x.op === op); return o ? `${plain(degreesText(o.degrees))} from device ${o.start}` : ""; }));
  plot(timelineDiv, [{ type: "heatmap", x: ops.map(plain), y: p.timeline.map((t) => `#${t.n} ${fmtCost(t.cost)}`), z, text, colorscale: "Blues", reversescale: true,
    hovertemplate: "%{y}<br>%{x}: %{z} devices (%{text})<extra></extra>", colorbar: { title: { text: "devices" } } }],
  { title: { text: "strategy timeline: each improvement of the search", font: { size: 13 } }, margin: { l: 120, r: 20, t: 40, b: 60 },
    yaxis: { autorange: "reversed", type: "category" } });
}

// ---------------------------------------------------------------------------------------------
// tasks

async function tasksPage(view, gen, query) {
  const state = listState(query);
  const search = el("input", { type: "search", placeholder: "filter by name, key, kind", id: "task-search" });
  search.value = state.q;
  const body = el("div", { id: "tasks" });
  const pager = el("div", { class: "pager", id: "tasks-pager" });
  view.replaceChildren(el("h1", {}, "Tasks"), card(null, el("div", { class: "toolbar" }, search), body, pager));
  let timer = null;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { state.q = search.value.trim(); state.offset = 0; load(); }, 250);
  });

  async function load() {
    const data = await api("tasks", { q: state.q, offset: state.offset, limit: state.limit });
    if (gen !== generation) return;
    if (pastTheEnd(data, data.tasks.length, state)) { await load(); return; }
    keepListState("/tasks", state, gen);
    const rows = data.tasks.map((t) => el("tr", {}, el("td", {}, taskLink(t.key, t.name)), el("td", {}, t.kind),
      el("td", { class: "config" }, t.key), el("td", { class: "num" }, fmtInt(t.campaigns))));
    body.replaceChildren(data.tasks.length
      ? table(["task", "kind", "key", { label: "campaigns", num: true }], rows, { id: "tasks-table" })
      : note(state.q ? "no task matches" : "no campaign yet"));
    listPager(pager, data, data.tasks.length, state, load);
  }
  await load();
}

async function taskPage(view, key, gen) {
  const t = await api("task", { task: key });
  if (gen !== generation) return;
  document.title = `${t.name} · autotune`;
  const bar = plotDiv("task-devices");
  const devRows = t.devices.map((d) => el("tr", {}, el("td", {}, d.device), el("td", {}, d.kind), el("td", { class: "num" }, fmtCost(d.best_cost, t.kind)),
    el("td", { class: "num" }, fmtInt(d.ok)), el("td", { class: "num" }, fmtInt(d.trials))));
  const campRows = t.campaigns.map((c) => el("tr", {}, el("td", {}, campaignLink(c.name)), el("td", {}, c.device), el("td", {}, c.algorithm),
    el("td", {}, statusTag(c.status)),
    el("td", {}, c.transfer ? el("span", {}, "warm start · ", el("code", {}, shorten(JSON.stringify(c.transfer.options), 120))) : el("span", { class: "muted" }, "none")),
    el("td", {}, el("details", {}, el("summary", {}, "options"), el("pre", {}, JSON.stringify(c.options, null, 2))))));
  view.replaceChildren(
    el("h1", {}, `Task ${t.name} `, el("span", { class: "tag" }, t.kind)),
    el("div", { class: "muted" }, `key ${t.key}`),
    card("Devices compared: best cost per device", t.devices.length ? bar : note("no trial of this task yet"),
      table(["device", "kind", { label: "best cost", num: true }, { label: "successful", num: true }, { label: "trials", num: true }], devRows, { id: "task-devices-table" })),
    card("Campaigns and transfer provenance", table(["campaign", "device", "algorithm", "status", "transfer", ""], campRows, { id: "task-campaigns" }),
      el("div", { class: "muted" }, "A campaign that warm-started from other devices' measurements runs a warm-start algorithm; its options say how many source configurations it measured first.")),
    card("Task parameters", el("pre", {}, JSON.stringify(t.params, null, 2))));
  if (t.devices.length) {
    const ds = t.devices.filter((d) => d.best_cost !== null);
    plot(bar, [{ type: "bar", x: ds.map((d) => plain(d.device)), y: ds.map((d) => d.best_cost), text: ds.map((d) => fmtCost(d.best_cost, t.kind)),
      textposition: "auto", marker: { color: "#2c6bd6" }, hovertemplate: "%{x}: %{text}<extra></extra>" }],
    { yaxis: costAxis("best cost", t.kind, ds.map((d) => d.best_cost)), margin: { l: 60, r: 20, t: 20, b: 80 } });
  }
}

// ---------------------------------------------------------------------------------------------
// cost models across campaigns

async function modelsPage(view, gen) {
  const data = await api("cost-models");
  if (gen !== generation) return;
  const box = el("div", { id: "models-page" });
  view.replaceChildren(el("h1", {}, "Cost models"), card("Quality over retrains, per campaign", box));
  renderModels(box, data.models, true);
}

// ---------------------------------------------------------------------------------------------

// the script is deferred: the document is parsed when it runs
window.addEventListener("hashchange", route);
api("info").then((i) => { document.getElementById("dbinfo").textContent = i.database; }).catch(() => {});
route();
