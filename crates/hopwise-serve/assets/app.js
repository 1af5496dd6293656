// The hopwise page: asks through POST /v1/ask with `Accept: text/event-stream` (fetch, not
// EventSource, so a bearer token can be sent) and redraws the graph on every event.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";
const state = { nodes: new Map(), edges: [], selected: null, question: "", answer: null };

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const token = $("token").value.trim();
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

async function loadStrategies() {
  try {
    const r = await fetch("/v1/strategies", { headers: headers() });
    if (r.status === 401) { setStatus("This server needs a token: open “token” and enter it.", true); $("auth").open = true; return; }
    const body = await r.json();
    const select = $("strategy");
    select.textContent = "";
    for (const s of body.strategies) {
      if (s.needs_retriever && !body.has_retriever) continue;
      const o = document.createElement("option");
      o.value = s.name; o.textContent = s.name; o.title = s.description;
      if (s.name === body.default) o.selected = true;
      select.appendChild(o);
    }
  } catch (e) { setStatus("Cannot reach the server: " + e, true); }
}

// ---- graph layout: layers by longest path, so every edge points right ----
function predecessors() {
  const preds = new Map();
  const add = (to, from) => { if (!preds.has(to)) preds.set(to, new Set()); preds.get(to).add(from); };
  for (const n of state.nodes.values()) {
    for (const p of n.parents || []) add(n.id, p);
    if (n.decomposes) add(n.decomposes, n.id);
  }
  for (const e of state.edges) add(e.to, e.from);
  return preds;
}

function layout() {
  const preds = predecessors();
  const rank = new Map();
  const visiting = new Set();
  const rankOf = (id) => {
    if (rank.has(id)) return rank.get(id);
    if (visiting.has(id)) return 0; // a cycle cannot come from the server, but never hang on one
    visiting.add(id);
    let r = 0;
    for (const p of preds.get(id) || []) if (p !== id) r = Math.max(r, rankOf(p) + 1);
    visiting.delete(id);
    rank.set(id, r);
    return r;
  };
  const ids = [...state.nodes.keys()];
  if (ids.length || state.edges.some((e) => e.to === "Q")) ids.push("Q");
  let maxRank = 0;
  for (const id of ids) if (id !== "Q") maxRank = Math.max(maxRank, rankOf(id));
  rank.set("Q", Math.max(maxRank + 1, rankOf("Q")));
  const layers = new Map();
  for (const id of ids) {
    const r = rank.get(id);
    if (!layers.has(r)) layers.set(r, []);
    layers.get(r).push(id);
  }
  const pos = new Map();
  const colW = 170, rowH = 90;
  let height = 0;
  for (const [r, members] of layers) {
    members.sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
    members.forEach((id, i) => pos.set(id, { x: 100 + r * colW, y: 50 + i * rowH }));
    height = Math.max(height, 50 + members.length * rowH);
  }
  return { pos, width: 200 + (rank.get("Q") || 0) * colW, height };
}

function el(name, attrs, parent) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function short(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }

function draw() {
  const svg = $("graph");
  svg.textContent = "";
  const defs = el("defs", {}, svg);
  const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "22", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto" }, defs);
  el("path", { d: "M0,0 L10,5 L0,10 z", fill: "#999" }, marker);
  const { pos, width, height } = layout();
  svg.setAttribute("viewBox", `0 0 ${Math.max(width, 400)} ${Math.max(height, 200)}`);
  // Grow with the graph instead of leaving a tall empty box.
  svg.style.height = Math.min(560, Math.max(200, height * 1.1)) + "px";
  const line = (from, to, cls) => {
    const a = pos.get(from), b = pos.get(to);
    if (a && b) el("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: cls }, svg);
  };
  for (const e of state.edges) line(e.from, e.to, "edge");
  for (const n of state.nodes.values()) {
    for (const p of n.parents || []) if (!state.edges.some((e) => e.from === p && e.to === n.id)) line(p, n.id, "edge");
    if (n.decomposes) line(n.id, n.decomposes, "edge child");
  }
  for (const [id, p] of pos) {
    const n = state.nodes.get(id);
    const decision = id === "Q" ? "sink" : (n && n.decision) || "pending";
    const g = el("g", { class: `node ${decision}${state.selected === id ? " selected" : ""}`, "data-id": id, "data-decision": decision, transform: `translate(${p.x},${p.y})` }, svg);
    el("circle", { r: 18 }, g);
    el("text", { class: "id" }, g).textContent = id;
    const label = id === "Q" ? state.question : (n ? n.question : "");
    el("text", { class: "label", y: 32 }, g).textContent = short(label, 24);
    el("title", {}, g).textContent = label;
    g.addEventListener("click", () => select(id));
  }
}

function select(id) {
  state.selected = id;
  const n = state.nodes.get(id);
  $("detail").hidden = false;
  $("detail-id").textContent = id;
  const decision = id === "Q" ? "question" : (n && n.decision) || "pending";
  $("detail-decision").textContent = decision + (n && n.best_effort ? " (best effort)" : "");
  $("detail-decision").className = "badge " + decision;
  $("detail-question").textContent = id === "Q" ? state.question : (n ? n.question : "");
  $("detail-rewritten").textContent = (n && n.rewritten) || "—";
  $("detail-answer").textContent = id === "Q" ? (state.answer || "—") : (n && n.answer) || "—";
  const list = $("detail-passages");
  list.textContent = "";
  for (const p of (n && n.passages) || []) {
    const li = document.createElement("li");
    const b = document.createElement("b");
    b.textContent = p.title || p.id;
    li.appendChild(b);
    li.appendChild(document.createTextNode(" — " + short(p.text || "", 300)));
    list.appendChild(li);
  }
  if (!list.children.length) list.appendChild(Object.assign(document.createElement("li"), { textContent: "none (no retrieval for this node)" }));
  draw();
}

// The words of Trace::confidence_in_words (hopwise-core), for the same thresholds.
function confidenceInWords(c) {
  if (c >= 0.999) return "every vote agrees";
  if (c > 0.5) return "a majority of the vote";
  return "leads a split vote";
}

function showResult(trace) {
  state.answer = trace.answer;
  for (const n of trace.nodes) state.nodes.set(n.id, n);
  state.edges = trace.edges;
  $("result").hidden = false;
  const marks = [];
  if (typeof trace.confidence === "number") marks.push(`confidence ${Math.round(trace.confidence * 100)}%: ${confidenceInWords(trace.confidence)}`);
  if (trace.best_effort) marks.push("best effort: a budget or a failure cut the work short");
  $("answer").textContent = (trace.answer || "(no answer)") + (marks.length ? `  (${marks.join("; ")})` : "");
  $("answer").classList.toggle("best-effort", !!trace.best_effort);
  $("rationale").textContent = trace.rationale || "";
  // The passages the answer rests on (trace.support), not every passage retrieved.
  const cites = $("citations");
  cites.textContent = "";
  const byId = new Map();
  for (const n of trace.nodes) for (const p of n.passages || []) if (!byId.has(p.id)) byId.set(p.id, { p, node: n.id });
  for (const id of trace.support || []) {
    const found = byId.get(id);
    if (!found) continue;
    const li = document.createElement("li");
    li.textContent = `${found.p.title || found.p.id} — ${short(found.p.text || "", 200)} (node ${found.node})`;
    cites.appendChild(li);
  }
  if (!cites.children.length) {
    const why = byId.size ? "none of the retrieved passages states the answer" : "answered without retrieval";
    cites.appendChild(Object.assign(document.createElement("li"), { textContent: `none: ${why}` }));
  }
  const s = trace.stats;
  $("stats").textContent = `${trace.strategy} · ${s.llm_calls} LLM calls · ${s.retrieval_rounds} retrieval rounds · ${s.prompt_tokens} prompt / ${s.completion_tokens} completion tokens · ${(s.wall_ms / 1000).toFixed(2)} s`;
  const notes = $("notes");
  notes.textContent = "";
  for (const note of trace.notes || []) notes.appendChild(Object.assign(document.createElement("li"), { textContent: note }));
  draw();
  if (state.selected) select(state.selected);
}

function onEvent(name, data) {
  if (name === "node") { state.nodes.set(data.node.id, data.node); draw(); if (state.selected === data.node.id) select(data.node.id); }
  else if (name === "edge") { if (!state.edges.some((e) => e.from === data.from && e.to === data.to)) state.edges.push({ from: data.from, to: data.to }); draw(); }
  else if (name === "llm_call") setStatus(`thinking: ${data.purpose}${data.node_id ? " (node " + data.node_id + ")" : ""}`);
  else if (name === "retrieval") setStatus(`retrieving: ${data.query}`);
  else if (name === "final") { setStatus("done"); showResult(data.trace); }
  else if (name === "error") setStatus(data.error ? data.error.message : "error", true);
}

// Minimal SSE parser over a fetch body: blocks separated by a blank line, `event:` and `data:` lines.
async function readEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) {
        try { onEvent(name, JSON.parse(data.join("\n"))); } catch (e) { console.error("bad event", e); }
      }
    }
  }
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  state.nodes.clear(); state.edges = []; state.selected = null; state.answer = null; state.question = question;
  $("result").hidden = true; $("detail").hidden = true;
  draw();
  setStatus("asking…");
  $("ask").disabled = true;
  try {
    const r = await fetch("/v1/ask", {
      method: "POST",
      headers: headers({ "Content-Type": "application/json", "Accept": "text/event-stream" }),
      body: JSON.stringify({ question, strategy: $("strategy").value || undefined }),
    });
    if (!r.ok) {
      let message = r.statusText;
      try { message = (await r.json()).error.message; } catch (_) { /* not JSON */ }
      setStatus(`${r.status}: ${message}`, true);
      return;
    }
    await readEvents(r);
  } catch (e) {
    setStatus("The request failed: " + e, true);
  } finally {
    $("ask").disabled = false;
  }
}

$("token").value = localStorage.getItem("hopwise-token") || "";
$("token").addEventListener("change", () => { localStorage.setItem("hopwise-token", $("token").value.trim()); loadStrategies(); });
$("ask-form").addEventListener("submit", ask);
loadStrategies();
draw();
