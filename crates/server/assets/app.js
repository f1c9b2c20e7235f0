// kgrag web page: compare retrieval strategies, browse the graph, manage documents.
// Plain JS, no framework. Every piece of server text goes into the DOM through textContent.
"use strict";

const KEY_STORE = "kgrag.apiKey";
const INDEX_STORE = "kgrag.index";
const PAGE_SIZE = 50;
const GRAPH_METHODS = ["hipporag2", "hirag"]; // the methods /v1/graph and the page know how to draw

const $ = (id) => document.getElementById(id);

// Small DOM builder: el("div", {class: "x", dataset: {testid: "y"}}, child, "text", ...).
// Strings become text nodes, so data can never turn into markup.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "dataset") Object.assign(node.dataset, v);
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

const state = {
  index: null,       // the index picked (null: the server's default, through the routes without a name)
  indexes: [],       // GET /v1/indexes
  info: null,        // GET /v1/strategies
  docOffset: 0,
  communitiesLoaded: false,
  graphRequest: 0,   // the newest graph request; older answers are dropped
};

// The route of the picked index for a per-index path ("/v1/query" -> "/v1/indexes/NAME/query").
function ix(path) {
  return state.index ? "/v1/indexes/" + encodeURIComponent(state.index) + path.slice(3) : path;
}

// ---------------------------------------------------------------- API

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// fetch + JSON + the contract's error shape. `body` may be a plain object (sent as JSON) or a Blob/File (sent raw).
async function api(method, path, body) {
  const headers = {};
  const key = localStorage.getItem(KEY_STORE);
  if (key) headers["Authorization"] = "Bearer " + key;
  let payload;
  if (body instanceof Blob) {
    payload = body;
    headers["Content-Type"] = "application/octet-stream";
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers["Content-Type"] = "application/json";
  }
  let resp;
  try {
    resp = await fetch(path, { method, headers, body: payload });
  } catch (e) {
    throw new ApiError(0, "network", "Cannot reach the server: " + e.message);
  }
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { /* not JSON */ }
  if (!resp.ok) {
    const err = data && data.error;
    const message = (err && err.message) || text || resp.statusText || "request failed";
    if (resp.status === 401) askForKey(key ? "The server rejected this key." : "This server needs an API key.");
    throw new ApiError(resp.status, (err && err.code) || "http_" + resp.status, message);
  }
  if (data && typeof data.generation === "number") setGeneration(data.generation);
  return data;
}

// A POST whose reply is a stream of server-sent events: `onEvent(name, data)` for each (data parsed as JSON).
async function apiStream(path, body, onEvent) {
  const headers = { "Content-Type": "application/json", "Accept": "text/event-stream" };
  const key = localStorage.getItem(KEY_STORE);
  if (key) headers["Authorization"] = "Bearer " + key;
  let resp;
  try {
    resp = await fetch(path, { method: "POST", headers, body: JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, "network", "Cannot reach the server: " + e.message);
  }
  if (!resp.ok) {
    const text = await resp.text();
    let data = null;
    try { data = JSON.parse(text); } catch (_) { /* not JSON */ }
    const err = data && data.error;
    if (resp.status === 401) askForKey(key ? "The server rejected this key." : "This server needs an API key.");
    throw new ApiError(resp.status, (err && err.code) || "http_" + resp.status, (err && err.message) || text || resp.statusText);
  }
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).replace(/^ /, "");
      }
      if (!data) continue;
      let parsed = null;
      try { parsed = JSON.parse(data); } catch (_) { continue; }
      onEvent(name, parsed);
    }
  }
}

// Opens a document's original file (fetched with the key) in a new tab, at `page` for a PDF.
async function openOriginal(id, page) {
  const tab = window.open("about:blank", "_blank");
  const headers = {};
  const key = localStorage.getItem(KEY_STORE);
  if (key) headers["Authorization"] = "Bearer " + key;
  try {
    const resp = await fetch(ix("/v1/documents/" + encodeURIComponent(id) + "/file"), { headers });
    if (!resp.ok) throw new Error((await resp.text()) || resp.statusText);
    const url = URL.createObjectURL(await resp.blob());
    const target = url + (page ? "#page=" + page : "");
    if (tab) tab.location.href = target; else window.location.href = target;
  } catch (e) {
    if (tab) tab.close();
    showError(new Error(`Cannot open the original of ${id}: ${e.message}`));
  }
}

// A passage's or citation's source: its label, a link that opens the original at the page when the index
// keeps it.
function sourceLink(source, testid) {
  if (!source) return null;
  if (!source.original) return el("span", { class: "source", text: source.label });
  const a = el("a", { class: "source", href: "#", title: "open the original" + (source.page ? " at page " + source.page : ""),
    dataset: { testid, document: source.document, page: source.page ?? "" }, text: source.label });
  a.addEventListener("click", (ev) => { ev.preventDefault(); openOriginal(source.document, source.page); });
  return a;
}

// The answer with its [n] marks as buttons that open the cited source.
function renderAnswer(text, citations, cls) {
  const byNumber = new Map((citations || []).map((c) => [String(c.number), c]));
  const p = el("p", { class: cls, dataset: { testid: "answer" } });
  let last = 0;
  for (const m of text.matchAll(/\[(\d+(?:,\s*\d+)*)\]/g)) {
    p.append(document.createTextNode(text.slice(last, m.index)));
    for (const n of m[1].split(/,\s*/)) {
      const c = byNumber.get(n);
      if (!c) { p.append(document.createTextNode(`[${n}]`)); continue; }
      const b = el("button", { type: "button", class: "cite", title: c.source ? c.source.label : c.chunk_id, dataset: { testid: "cite" }, text: n });
      if (c.source && c.source.original) b.addEventListener("click", () => openOriginal(c.source.document, c.source.page));
      p.append(b);
    }
    last = m.index + m[0].length;
  }
  p.append(document.createTextNode(text.slice(last)));
  return p;
}

function setGeneration(g) {
  $("generation").textContent = "generation " + g;
}

function showError(err) {
  const box = $("error");
  if (!err) { box.hidden = true; box.textContent = ""; return; }
  const msg = err instanceof ApiError && err.status ? `${err.message} (${err.status} ${err.code})` : err.message || String(err);
  box.textContent = msg;
  box.hidden = false;
}

// ---------------------------------------------------------------- API key

function askForKey(note) {
  $("apikey-form").hidden = false;
  $("apikey-note").textContent = note;
  $("apikey").focus();
}

$("apikey-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const key = $("apikey").value.trim();
  if (key) localStorage.setItem(KEY_STORE, key);
  else localStorage.removeItem(KEY_STORE);
  $("apikey").value = "";
  $("apikey-form").hidden = true;
  showError(null);
  init(); // load everything again with the key
});

// ---------------------------------------------------------------- tabs

function showTab(name) {
  for (const btn of document.querySelectorAll("[role=tab]")) {
    const on = btn.dataset.tab === name;
    btn.setAttribute("aria-selected", on ? "true" : "false");
    btn.tabIndex = on ? 0 : -1;
    $("panel-" + btn.dataset.tab).hidden = !on;
  }
  if (name === "documents") { loadDocuments(); loadStats(); }
  if (name === "graph") {
    if (!$("graph-svg").dataset.state) graphMessage("No graph yet: pick an entity above.");
    if (!state.communitiesLoaded) loadCommunities();
  }
}

for (const btn of document.querySelectorAll("[role=tab]")) {
  btn.addEventListener("click", () => showTab(btn.dataset.tab));
  // Arrow keys move between tabs (the usual tablist keyboard pattern).
  btn.addEventListener("keydown", (ev) => {
    if (ev.key !== "ArrowRight" && ev.key !== "ArrowLeft") return;
    const tabs = [...document.querySelectorAll("[role=tab]")];
    const i = tabs.indexOf(btn) + (ev.key === "ArrowRight" ? 1 : -1);
    const next = tabs[(i + tabs.length) % tabs.length];
    next.focus();
    showTab(next.dataset.tab);
  });
}

// ---------------------------------------------------------------- Ask

async function loadStrategies() {
  const list = $("strategy-list");
  try {
    const info = await api("GET", ix("/v1/strategies"));
    state.info = info;
    list.replaceChildren();
    // Tick the default strategy and one more (the first other one).
    const ticked = new Set([info.default]);
    for (const s of info.strategies) { if (ticked.size >= 2) break; ticked.add(s); }
    for (const s of info.strategies) {
      const box = el("input", { type: "checkbox", value: s, id: "strategy-" + s, dataset: { testid: "strategy-" + s } });
      box.checked = ticked.has(s);
      list.append(el("label", { for: "strategy-" + s, class: "check" }, box, s, s === info.default ? el("span", { class: "muted", text: " (default)" }) : null));
    }
    if (info.top_k) $("top-k").value = info.top_k;
    $("reader").textContent = "reader: " + info.reader;
    if (info.reader === "none") $("want-answer").checked = false;
    fillGraphMethods(info.methods || []);
  } catch (e) {
    list.replaceChildren(el("span", { class: "muted", text: "could not load the strategies" }));
    showError(e);
  }
}

function tickedStrategies() {
  return [...document.querySelectorAll("#strategy-list input:checked")].map((b) => b.value);
}

$("question").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    $("ask-form").requestSubmit();
  }
});

$("ask-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const question = $("question").value.trim();
  const strategies = tickedStrategies();
  if (!question) { showError(new Error("Type a question first.")); return; }
  if (!strategies.length) { showError(new Error("Tick at least one strategy.")); return; }
  showError(null);
  const wantContext = $("want-context").checked;
  const body = { question, strategies, answer: $("want-answer").checked, context: wantContext };
  const k = parseInt($("top-k").value, 10);
  if (k > 0) body.top_k = k;

  const results = $("results");
  const btn = $("ask");
  $("results-hint").hidden = true;
  btn.disabled = true;
  btn.textContent = "Asking…";
  results.setAttribute("aria-busy", "true");
  // Placeholders (without the result-* test ids) while the strategies run.
  results.replaceChildren(...strategies.map((s) =>
    el("article", { class: "result loading" }, el("h3", { text: s }), el("p", { class: "muted", text: "retrieving…" }))));
  try {
    // Streamed: each column shows its passages once retrieved and its answer as the reader writes it;
    // the finished result (with its citations) replaces it.
    const columns = new Map();
    results.replaceChildren(...strategies.map((s) => {
      const col = el("article", { class: "result loading" }, el("h3", { text: s }), el("p", { class: "muted", text: "retrieving…" }));
      columns.set(s, { col, answer: null });
      return col;
    }));
    body.stream = true;
    await apiStream(ix("/v1/compare"), body, (event, data) => {
      const c = columns.get(data.strategy);
      if (event === "passages" && c) {
        const col = el("article", { class: "result loading", dataset: { strategy: data.strategy } }, el("h3", { text: data.strategy }));
        c.answer = el("p", { class: "answer streaming", dataset: { testid: "streaming-answer" } });
        if (body.answer) col.append(c.answer);
        const ol = el("ol", { class: "passages" });
        for (const p of data.passages || []) ol.append(renderPassage(p));
        col.append(el("h4", { text: `passages (${(data.passages || []).length})` }), ol);
        c.col.replaceWith(col);
        c.col = col;
      } else if (event === "token" && c && c.answer) {
        c.answer.textContent += data.text;
      } else if (event === "result" && c) {
        const col = renderResult(data);
        c.col.replaceWith(col);
        c.col = col;
      } else if (event === "done" && typeof data.generation === "number") {
        setGeneration(data.generation);
      }
    });
    $("results-hint").hidden = results.scrollWidth <= results.clientWidth + 1;
  } catch (e) {
    results.replaceChildren();
    showError(e);
  } finally {
    btn.disabled = false;
    btn.textContent = "Ask";
    results.removeAttribute("aria-busy");
  }
});

function fmtMs(ms) { return typeof ms === "number" ? (ms < 10 ? ms.toFixed(1) : Math.round(ms)) + " ms" : "–"; }

// One result column.
function renderResult(r) {
  const s = r.stats || {};
  const col = el("article", { class: "result", dataset: { testid: "result-" + r.strategy, strategy: r.strategy } },
    el("h3", { text: r.strategy }));
  // A strategy that failed (the others still answered): its message in its column.
  if (r.error) {
    col.append(el("p", { class: "error", role: "alert", text: r.error.message || r.error.code || "failed" }));
    return col;
  }

  if (r.answer !== null && r.answer !== undefined) {
    // Short answers stand out; a long one (an extractive reader's sentences) is clamped like a passage.
    const long = r.answer.length > 240;
    const answer = renderAnswer(r.answer, r.citations, long ? "answer long clamp" : "answer");
    col.append(answer);
    if (long) col.append(moreButton(answer));
    const cited = r.citations || [];
    if (cited.length) {
      col.append(el("ul", { class: "citations", dataset: { testid: "citations" } },
        cited.map((c) => el("li", {}, el("span", { class: "num", text: `[${c.number}]` }), " ",
          sourceLink(c.source, "citation") || el("span", { class: "source", text: c.chunk_id })))));
    }
  }
  else if ($("want-answer").checked) col.append(el("p", { class: "answer muted", text: "no answer" }));

  col.append(el("p", {
    class: "stats",
    title: `retrieve ${fmtMs(s.retrieve_ms)}, answer ${fmtMs(s.answer_ms)}`,
    text: [fmtMs(s.latency_ms)]
      .concat(typeof s.first_token_ms === "number" ? [`first token ${fmtMs(s.first_token_ms)}`] : [])
      .concat([`${s.context_tokens ?? "–"} ctx tokens`, `${s.llm_calls ?? "–"} LLM calls`, `gen ${s.generation ?? "–"}`])
      .concat(s.dropped_citations ? [`${s.dropped_citations} unknown citation${s.dropped_citations === 1 ? "" : "s"} dropped`] : [])
      .join(" · "),
  }));

  const passages = r.passages || [];
  const ol = el("ol", { class: "passages" });
  for (const p of passages) ol.append(renderPassage(p));
  col.append(el("h4", { text: `passages (${passages.length})` }), passages.length ? ol : el("p", { class: "muted", text: "no passage retrieved" }));

  const entities = r.entities || [];
  if (entities.length) {
    const method = graphMethodFor(r.strategy);
    col.append(el("h4", { text: `entities (${entities.length})` }),
      el("div", { class: "chips" }, entities.map((name) => entityChip(name, method, "entity"))));
  }

  if (typeof r.context === "string") {
    col.append(el("details", { class: "context" }, el("summary", { text: "context" }), el("pre", { text: r.context })));
  }
  return col;
}

function renderPassage(p) {
  const text = el("p", { class: "ptext clamp", text: p.text });
  const li = el("li", { class: "passage", dataset: { testid: "passage" } },
    el("div", { class: "pmeta" },
      el("span", { class: "rank", text: "#" + p.rank }),
      el("span", { class: "score", title: "score", text: typeof p.score === "number" ? p.score.toFixed(4) : String(p.score) }),
      p.source ? sourceLink(p.source, "passage-source")
        : el("span", { class: "docs", title: p.chunk_id || "", text: (p.documents || []).join(", ") })),
    text);
  // Long texts are clamped to a few lines; a button unfolds them.
  if ((p.text || "").length > 220) li.append(moreButton(text));
  return li;
}

// A "more"/"less" button that unclamps `text` (an element with the class "clamp").
function moreButton(text) {
  const more = el("button", { type: "button", class: "link", "aria-expanded": "false", text: "more" });
  more.addEventListener("click", () => {
    const open = text.classList.toggle("clamp") === false;
    more.textContent = open ? "less" : "more";
    more.setAttribute("aria-expanded", String(open));
  });
  return more;
}

// The graph that shows a strategy's entities: HippoRAG 2's for dense and hipporag2, HiRAG's for the rest,
// falling back to whichever graph the index has.
function graphMethodFor(strategy) {
  const want = strategy === "dense" || strategy === "hipporag2" ? "hipporag2" : "hirag";
  const have = availableGraphMethods();
  return have.includes(want) ? want : have[0] || want;
}

function availableGraphMethods() {
  const methods = (state.info && state.info.methods) || [];
  return GRAPH_METHODS.filter((m) => methods.includes(m));
}

function entityChip(name, method, testid) {
  return el("button", {
    type: "button", class: "chip", dataset: { testid }, title: `show "${name}" in the ${method} graph`,
    onclick: () => openGraph(method, name),
  }, name);
}

// ---------------------------------------------------------------- Graph

function fillGraphMethods(methods) {
  const sel = $("graph-method");
  const have = GRAPH_METHODS.filter((m) => methods.includes(m));
  sel.replaceChildren(...have.map((m) => el("option", { value: m, text: m })));
  if (!have.length) $("graph-note").textContent = "This index has no graph method (hipporag2 or hirag).";
}

function openGraph(method, entity) {
  showTab("graph");
  if ([...$("graph-method").options].some((o) => o.value === method)) $("graph-method").value = method;
  $("graph-entity").value = entity;
  loadGraph();
}

$("graph-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadGraph(); });

async function loadGraph() {
  const method = $("graph-method").value;
  const entity = $("graph-entity").value.trim();
  if (!method || !entity) return;
  const depth = Math.min(2, Math.max(1, parseInt($("graph-depth").value, 10) || 1));
  const limit = Math.max(2, parseInt($("graph-limit").value, 10) || 60);
  const q = new URLSearchParams({ method, entity, depth: String(depth), limit: String(limit) });
  const req = ++state.graphRequest;
  $("graph-svg").dataset.state = "loading"; // loading | ok | missing | error: for styles and tests
  $("graph-note").textContent = `loading the ${method} graph around "${entity}"…`;
  $("graph-detail").hidden = true;
  showError(null);
  try {
    const g = await api("GET", ix("/v1/graph?" + q));
    if (req !== state.graphRequest) return; // a newer request was made meanwhile
    drawGraph(g);
    $("graph-svg").dataset.state = "ok";
    $("graph-note").textContent = `${g.method}: ${g.nodes.length} nodes, ${g.edges.length} edges around "${g.center}". Click a node to centre on it.`;
  } catch (e) {
    if (req !== state.graphRequest) return;
    $("graph-svg").dataset.state = e.status === 404 ? "missing" : "error";
    $("graph-note").textContent = e.status === 404 ? `"${entity}" is not in the ${method} graph.` : "The graph could not be loaded.";
    graphMessage($("graph-note").textContent);
    if (e.status !== 404) showError(e);
  }
}

// Deterministic force-directed layout (Fruchterman–Reingold). Nodes start on rings by hop distance from the
// centre, so the same graph always gets the same picture; the centre stays pinned at the origin.
function layout(nodes, edges, centerId) {
  const idx = new Map(nodes.map((n, i) => [n.id, i]));
  const links = edges.map((e) => [idx.get(e.source), idx.get(e.target)]).filter(([a, b]) => a !== undefined && b !== undefined && a !== b);
  const adj = nodes.map(() => []);
  for (const [a, b] of links) { adj[a].push(b); adj[b].push(a); }

  // Hop distance from the centre (breadth-first); unreachable nodes go on an outer ring.
  const c = idx.has(centerId) ? idx.get(centerId) : 0;
  const hop = nodes.map(() => -1);
  hop[c] = 0;
  const queue = [c];
  while (queue.length) {
    const u = queue.shift();
    for (const v of adj[u]) if (hop[v] < 0) { hop[v] = hop[u] + 1; queue.push(v); }
  }
  const maxHop = Math.max(0, ...hop);
  const rings = new Map();
  nodes.forEach((_, i) => { const h = hop[i] < 0 ? maxHop + 1 : hop[i]; if (!rings.has(h)) rings.set(h, []); rings.get(h).push(i); });
  const pos = nodes.map(() => ({ x: 0, y: 0 }));
  for (const [h, members] of rings) {
    members.forEach((i, j) => {
      const a = (2 * Math.PI * j) / members.length + h * 0.7;
      pos[i] = { x: h * 150 * Math.cos(a), y: h * 150 * Math.sin(a) };
    });
  }

  const n = nodes.length;
  const k = 90; // ideal edge length
  let temp = 60;
  for (let iter = 0; iter < 300; iter++) {
    const disp = pos.map(() => ({ x: 0, y: 0 }));
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        let dx = pos[i].x - pos[j].x, dy = pos[i].y - pos[j].y;
        let d2 = dx * dx + dy * dy;
        if (d2 < 0.01) { dx = 0.1 * ((i % 7) - 3) + 0.05; dy = 0.1 * ((j % 5) - 2) + 0.05; d2 = dx * dx + dy * dy; } // deterministic nudge
        const f = (k * k) / d2; // repulsion k²/d, applied along the unit vector (dx,dy)/d
        disp[i].x += dx * f; disp[i].y += dy * f;
        disp[j].x -= dx * f; disp[j].y -= dy * f;
      }
    }
    for (const [a, b] of links) {
      const dx = pos[a].x - pos[b].x, dy = pos[a].y - pos[b].y;
      const d = Math.sqrt(dx * dx + dy * dy) || 0.01;
      // Attraction d²/k along the unit vector, softened between well-connected nodes so a dense core does not
      // collapse into a knot.
      const f = d / k / Math.sqrt(Math.min(adj[a].length, adj[b].length));
      disp[a].x -= dx * f; disp[a].y -= dy * f;
      disp[b].x += dx * f; disp[b].y += dy * f;
    }
    for (let i = 0; i < n; i++) {
      if (i === c) continue;
      // A weak pull to the origin keeps disconnected pieces on the screen.
      disp[i].x -= pos[i].x * 0.05; disp[i].y -= pos[i].y * 0.05;
      const d = Math.sqrt(disp[i].x ** 2 + disp[i].y ** 2) || 1;
      const step = Math.min(d, temp);
      pos[i].x += (disp[i].x / d) * step;
      pos[i].y += (disp[i].y / d) * step;
    }
    temp = Math.max(1, temp * 0.985);
  }
  return { pos, links, center: c };
}

const SVGNS = "http://www.w3.org/2000/svg";
function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function shortLabel(s, max) { return s.length > max ? s.slice(0, max - 1) + "…" : s; }

function findCenter(g) {
  const c = String(g.center || "").toLowerCase();
  const hit = g.nodes.find((n) => n.id === g.center) || g.nodes.find((n) => String(n.label).toLowerCase() === c)
    || g.nodes.find((n) => n.id.toLowerCase() === "e:" + c);
  return hit ? hit.id : (g.nodes[0] && g.nodes[0].id);
}

// An empty graph area: one line of text in a short box.
function graphMessage(text) {
  const svg = $("graph-svg");
  const W = Math.round(svg.getBoundingClientRect().width) || 800;
  svg.setAttribute("viewBox", `0 0 ${W} 120`);
  svg.replaceChildren(svgEl("text", { x: W / 2, y: 64, class: "gmsg" }, text));
}

function drawGraph(g) {
  const svg = $("graph-svg");
  svg.replaceChildren();
  if (!g.nodes.length) return graphMessage("No nodes around this entity.");
  const centerId = findCenter(g);
  const { pos, links, center } = layout(g.nodes, g.edges, centerId);

  // The view box takes the SVG's on-screen size, so labels keep their pixel size on a phone too; the layout
  // is fitted into it with room for labels (portrait on a narrow screen).
  const W = Math.round(svg.getBoundingClientRect().width) || 800;
  const H = Math.round(Math.min(W < 600 ? W * 1.25 : W * 0.62, 640, 260 + 12 * g.nodes.length)); // small graphs, short box
  const pad = W < 600 ? 40 : 60;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const xs = pos.map((p) => p.x), ys = pos.map((p) => p.y);
  const minX = Math.min(...xs), maxX = Math.max(...xs), minY = Math.min(...ys), maxY = Math.max(...ys);
  const scale = Math.min((W - 2 * pad) / (maxX - minX || 1), (H - 2 * pad) / (maxY - minY || 1), 1.5);
  const ox = W / 2 - ((minX + maxX) / 2) * scale, oy = H / 2 - ((minY + maxY) / 2) * scale;
  const P = pos.map((p) => ({ x: ox + p.x * scale, y: oy + p.y * scale }));

  const edgeLayer = svgEl("g", { class: "edges" });
  const edgeLabels = [];
  const index = new Map(g.nodes.map((n, i) => [n.id, i]));
  g.edges.forEach((e) => {
    const a = index.get(e.source), b = index.get(e.target);
    if (a === undefined || b === undefined || a === b) return;
    const w = typeof e.weight === "number" ? Math.min(4, 0.8 + e.weight) : 1;
    const line = svgEl("line", { x1: P[a].x, y1: P[a].y, x2: P[b].x, y2: P[b].y, "stroke-width": w.toFixed(2) });
    if (e.label) line.append(svgEl("title", {}, e.label));
    edgeLayer.append(line);
    if (e.label) edgeLabels.push({ text: shortLabel(e.label, 20), x: (P[a].x + P[b].x) / 2, y: (P[a].y + P[b].y) / 2 });
  });
  svg.append(edgeLayer);

  // Labels: the centre's first, then by degree; a label that would overlap one already placed stays hidden
  // until its node is hovered or focused (estimated text boxes, 6.5px a character).
  const radius = (node, i) => (i === center ? 14 : Math.min(12, 5 + Math.sqrt(node.degree || 1) * 1.5));
  const labels = g.nodes.map((node) => shortLabel(String(node.label), node.kind === "passage" ? 18 : 26));
  const order = g.nodes.map((_, i) => i).sort((a, b) => (b === center) - (a === center) || (g.nodes[b].degree || 0) - (g.nodes[a].degree || 0) || a - b);
  const placed = [], shown = new Set();
  const place = (cx, top, chars, charWidth) => {
    const w = chars * charWidth, box = { x0: cx - w / 2, x1: cx + w / 2, y0: top, y1: top + 14 };
    if (placed.some((o) => box.x0 < o.x1 && o.x0 < box.x1 && box.y0 < o.y1 && o.y0 < box.y1)) return false;
    placed.push(box);
    return true;
  };
  for (const i of order) if (place(P[i].x, P[i].y + radius(g.nodes[i], i) + 1, labels[i].length, 6.5)) shown.add(i);
  // For the edge labels the circles are obstacles too.
  g.nodes.forEach((node, i) => { const r = radius(node, i); placed.push({ x0: P[i].x - r, x1: P[i].x + r, y0: P[i].y - r, y1: P[i].y + r }); });
  // Edge labels (relations) go where they collide with nothing placed before; all are in the lines' tooltips.
  for (const l of edgeLabels) {
    if (place(l.x, l.y - 10, l.text.length, 6)) edgeLayer.append(svgEl("text", { x: l.x, y: l.y, class: "elabel" }, l.text));
  }

  const nodeLayer = svgEl("g", { class: "nodes" });
  g.nodes.forEach((node, i) => {
    const isCenter = i === center;
    const r = radius(node, i);
    const grp = svgEl("g", {
      class: `node k-${node.kind}${isCenter ? " center" : ""}`, "data-testid": "graph-node",
      transform: `translate(${P[i].x.toFixed(1)},${P[i].y.toFixed(1)})`, tabindex: "0", role: "button",
      "aria-label": `${node.kind} ${node.label}${isCenter ? " (centre)" : ""}`,
    });
    grp.append(svgEl("circle", { r: r.toFixed(1) }),
      svgEl("title", {}, `${node.label} (${node.kind}, degree ${node.degree})`),
      svgEl("text", { y: (r + 12).toFixed(1), class: shown.has(i) ? "nlabel" : "nlabel hover-only" }, labels[i]));
    const activate = () => nodeClicked(node);
    grp.addEventListener("click", activate);
    grp.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); activate(); } });
    nodeLayer.append(grp);
  });
  svg.append(nodeLayer);
}

// Entity and summary nodes re-centre the graph; a passage node shows its text below the graph.
function nodeClicked(node) {
  if (node.kind === "passage") {
    const d = $("graph-detail");
    d.textContent = node.label;
    d.hidden = false;
    return;
  }
  $("graph-entity").value = node.label;
  loadGraph();
}

// HiRAG's communities, one level at a time. Only asked for when the index has HiRAG.
async function loadCommunities() {
  const list = $("communities"), note = $("community-note"), sel = $("community-level");
  if (!availableGraphMethods().includes("hirag")) {
    if (state.info) { sel.disabled = true; note.textContent = "HiRAG is not indexed: no communities."; list.replaceChildren(); }
    return;
  }
  state.communitiesLoaded = true;
  const level = parseInt(sel.value, 10) || 0;
  note.textContent = "loading…";
  try {
    const data = await api("GET", ix("/v1/communities?level=" + level));
    // The level select offers every level the index has.
    if (sel.options.length !== data.levels) {
      sel.replaceChildren(...Array.from({ length: data.levels }, (_, i) => el("option", { value: i, text: String(i) })));
    }
    sel.value = String(data.level);
    sel.disabled = false;
    const shown = data.communities.slice(0, 200);
    note.textContent = `${data.communities.length} communities at level ${data.level}` + (shown.length < data.communities.length ? ` (showing ${shown.length})` : "");
    list.replaceChildren(...shown.map((c) => el("li", { class: "community card" },
      el("h3", {}, c.title || c.id, el("span", { class: "muted", text: ` · ${c.id}` })),
      el("div", { class: "chips" }, (c.entities || []).map((name) => entityChip(name, "hirag", "community-entity"))),
      c.report ? el("details", {}, el("summary", { text: "report" }), el("p", { class: "report", text: c.report })) : null)));
  } catch (e) {
    list.replaceChildren();
    if (e.status === 404) { sel.disabled = true; note.textContent = "HiRAG is not indexed: no communities."; }
    else { state.communitiesLoaded = false; note.textContent = "could not load the communities"; showError(e); }
  }
}
$("community-level").addEventListener("change", loadCommunities);

// ---------------------------------------------------------------- Documents & stats

async function loadDocuments() {
  const rows = $("doc-rows");
  try {
    const data = await api("GET", ix(`/v1/documents?offset=${state.docOffset}&limit=${PAGE_SIZE}`));
    // Past the end (e.g. after deleting the last row of the last page): step back a page.
    if (!data.documents.length && data.total > 0 && state.docOffset > 0) {
      state.docOffset = Math.max(0, Math.floor((data.total - 1) / PAGE_SIZE) * PAGE_SIZE);
      return loadDocuments();
    }
    rows.replaceChildren(...data.documents.map((d) => el("tr", { dataset: { testid: "doc-row", id: d.id } },
      el("td", { class: "id", text: d.id }),
      el("td", { text: d.title ?? "" }),
      el("td", { class: "muted", text: d.source ?? "" }),
      el("td", { class: "num", text: String(d.chunks) }),
      el("td", {}, el("button", { type: "button", class: "danger", "aria-label": `delete ${d.id}`, onclick: () => deleteDocument(d.id) }, "Delete")))));
    if (!data.documents.length) rows.append(el("tr", {}, el("td", { colspan: "5", class: "muted", text: "no documents" })));
    const end = data.offset + data.documents.length;
    $("doc-count").textContent = `(${data.total})`;
    $("doc-page").textContent = data.total ? `${data.offset + 1}–${end} of ${data.total}` : "";
    $("doc-prev").disabled = data.offset === 0;
    $("doc-next").disabled = end >= data.total;
  } catch (e) {
    showError(e);
  }
}

$("doc-prev").addEventListener("click", () => { state.docOffset = Math.max(0, state.docOffset - PAGE_SIZE); loadDocuments(); });
$("doc-next").addEventListener("click", () => { state.docOffset += PAGE_SIZE; loadDocuments(); });

function fmtBytes(n) {
  if (typeof n !== "number") return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}

function fmtValue(v) {
  if (typeof v === "number") return Number.isInteger(v) ? v.toLocaleString("en") : v.toFixed(3);
  if (v === null || v === undefined) return "–";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

async function loadStats() {
  const box = $("stats");
  try {
    const s = await api("GET", ix("/v1/stats"));
    const summary = el("dl", { class: "kv" },
      el("dt", { text: "generation" }), el("dd", { text: fmtValue(s.generation) }),
      el("dt", { text: "documents" }), el("dd", { text: fmtValue(s.documents) }),
      el("dt", { text: "chunks" }), el("dd", { text: fmtValue(s.chunks) }),
      el("dt", { text: "bytes_total" }), el("dd", { title: `${s.bytes_total} bytes`, text: fmtBytes(s.bytes_total) }));
    // Per method: its numbers as a short list, anything nested (per layer, per kind) folded as JSON.
    const cell = (k, v) => /bytes/.test(k) && typeof v === "number"
      ? el("dd", { title: `${v} bytes`, text: fmtBytes(v) }) : el("dd", { text: fmtValue(v) });
    const table = el("div", { class: "mstats" }, Object.entries(s.methods || {}).map(([name, m]) => {
      const entries = Object.entries(m || {});
      const plain = entries.filter(([, v]) => v === null || typeof v !== "object");
      const nested = entries.filter(([, v]) => v !== null && typeof v === "object");
      return el("section", { class: "mstat" },
        el("h4", { text: name }),
        plain.length ? el("dl", { class: "kv" }, plain.flatMap(([k, v]) => [el("dt", { text: k.replace(/_/g, " ") }), cell(k, v)]))
          : el("p", { class: "muted", text: "no counts: passages and their vectors only" }),
        nested.length ? el("details", {}, el("summary", { text: `more (${nested.map(([k]) => k.replace(/_/g, " ")).join(", ")})` }),
          el("pre", { class: "json", text: JSON.stringify(Object.fromEntries(nested), null, 1) })) : "");
    }));
    box.replaceChildren(summary, table || "");
  } catch (e) {
    box.replaceChildren(el("span", { class: "muted", text: "could not load the stats" }));
    if (e.status !== 401) showError(e);
  }
}

// A change summary: "1 document, 3 chunks indexed — generation 4 (skipped: …)".
function changeSummary(verb, r) {
  const plural = (n, w) => `${n} ${w}${n === 1 ? "" : "s"}`;
  let s = `${verb}: ${plural(r.documents, "document")}, ${plural(r.chunks, "chunk")} — generation ${r.generation}`;
  if (r.skipped && r.skipped.length) s += ` (skipped: ${r.skipped.map((x) => (typeof x === "string" ? x : JSON.stringify(x))).join(", ")})`;
  return s;
}

function setStatus(id, kind, text) {
  const p = $(id);
  p.dataset.state = kind; // "busy" | "ok" | "error": for styles and tests
  p.textContent = text;
}

async function afterChange() {
  await Promise.all([loadDocuments(), loadStats()]);
}

$("upload").addEventListener("change", async (ev) => {
  const input = ev.target;
  const files = [...input.files];
  if (!files.length) return;
  input.disabled = true;
  const done = [];
  try {
    for (const f of files) {
      setStatus("upload-status", "busy", `Uploading and indexing ${f.name}… (this can take a few seconds)`);
      const r = await api("POST", ix("/v1/documents?filename=" + encodeURIComponent(f.name)), f);
      done.push(changeSummary(`Indexed ${f.name}`, r));
    }
    setStatus("upload-status", "ok", done.join("\n"));
  } catch (e) {
    setStatus("upload-status", "error", [...done, `Upload failed: ${e.message}`].join("\n"));
  } finally {
    input.disabled = false;
    input.value = "";
    afterChange();
  }
});

$("paste-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const id = $("paste-id").value.trim(), text = $("paste-text").value;
  if (!id || !text.trim()) return;
  const btn = ev.target.querySelector("button");
  btn.disabled = true;
  setStatus("paste-status", "busy", "Indexing…");
  try {
    const r = await api("POST", ix("/v1/documents"), { documents: [{ id, text }] });
    setStatus("paste-status", "ok", changeSummary("Indexed", r));
    $("paste-id").value = ""; $("paste-text").value = "";
  } catch (e) {
    setStatus("paste-status", "error", "Failed: " + e.message);
  } finally {
    btn.disabled = false;
    afterChange();
  }
});

async function deleteDocument(id) {
  if (!window.confirm(`Delete the document "${id}" from the index?`)) return;
  setStatus("doc-status", "busy", `Deleting ${id}…`);
  try {
    const r = await api("DELETE", ix("/v1/documents/" + encodeURIComponent(id)));
    setStatus("doc-status", "ok", changeSummary(`Deleted ${id}`, r));
  } catch (e) {
    setStatus("doc-status", "error", `Could not delete ${id}: ${e.message}`);
  }
  afterChange();
}

// ---------------------------------------------------------------- start

// The indexes this key may see: a picker when there is more than one (or no default). The pick is kept in
// the address (?index=NAME, so a link opens the same index) and in localStorage.
async function loadIndexes() {
  let list;
  try {
    list = await api("GET", "/v1/indexes");
  } catch (e) {
    if (e.status === 404) return; // an older server: one index
    throw e;
  }
  state.indexes = list.indexes || [];
  const names = state.indexes.map((i) => i.name);
  const wanted = new URLSearchParams(location.search).get("index") || localStorage.getItem(INDEX_STORE);
  let pick = names.includes(wanted) ? wanted : list.default || names[0] || null;
  state.index = pick && pick !== list.default ? pick : null;
  const select = $("index-pick");
  select.replaceChildren(...state.indexes.map((i) =>
    el("option", { value: i.name, text: i.name + (i.default ? " (default)" : "") + (i.change ? "" : " · read-only") })));
  if (pick) select.value = pick;
  $("index-pick-label").hidden = names.length < 2 && list.default !== null;
  const current = state.indexes.find((i) => i.name === pick);
  document.body.classList.toggle("read-only", !!current && !current.change);
}

$("index-pick").addEventListener("change", () => {
  const pick = $("index-pick").value;
  localStorage.setItem(INDEX_STORE, pick);
  const url = new URL(location.href);
  url.searchParams.set("index", pick);
  history.replaceState(null, "", url);
  $("results").replaceChildren();
  state.docOffset = 0;
  showError(null);
  init();
});

async function init() {
  state.communitiesLoaded = false;
  api("GET", "/health").catch(() => {}); // the generation, even before an API key is given
  try {
    await loadIndexes();
  } catch (e) {
    showError(e);
    return;
  }
  await loadStrategies();
  // Which index the page now shows (tests wait for it after a pick).
  document.body.dataset.index = $("index-pick").value || "";
  const open = document.querySelector("[role=tab][aria-selected=true]").dataset.tab;
  if (open !== "ask") showTab(open);
}

init();
