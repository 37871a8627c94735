// The teaching page: keeps its state in the address (shareable), asks fplab serve for the sums
// (/api/explain) and draws the answer: results, the "why" sentence, the traced tree, and the
// histogram of nondeterministic orders over many runs. No library, no network beyond the server.
"use strict";

const $ = (id) => document.getElementById(id);
const svgNS = "http://www.w3.org/2000/svg";
let catalogue = null;
let answer = null;
let inFlight = null;
let timer = null;

const state = {
  numbers: "1e8 1 -1e8 1", gen: "", count: 16, seed: 1, format: "fp32", mode: "rne",
  orders: ["seq", "rev", "pairwise", "numpy"], custom: "", impl_seed: 0, tree: "seq",
};

function el(tag, attributes = {}, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(svgNS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attributes)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// ---- state <-> address ----
function readAddress() {
  const p = new URLSearchParams(location.hash.slice(1));
  for (const key of ["numbers", "gen", "format", "mode", "custom", "tree"]) if (p.has(key)) state[key] = p.get(key);
  for (const key of ["count", "seed", "impl_seed"]) if (p.has(key) && /^\d+$/.test(p.get(key))) state[key] = Number(p.get(key));
  if (p.has("orders")) state.orders = p.get("orders").split(",").filter(Boolean);
}
function writeAddress() {
  const p = new URLSearchParams();
  if (state.gen) { p.set("gen", state.gen); p.set("count", state.count); p.set("seed", state.seed); }
  else p.set("numbers", state.numbers.length <= 4000 ? state.numbers : "");
  p.set("format", state.format); p.set("mode", state.mode); p.set("orders", state.orders.join(","));
  if (state.custom) p.set("custom", state.custom);
  if (state.impl_seed) p.set("impl_seed", state.impl_seed);
  p.set("tree", state.tree);
  history.replaceState(null, "", "#" + p.toString());
}

// ---- controls ----
function buildControls() {
  const generators = $("generators");
  for (const g of catalogue.generators) {
    const b = el("button", { type: "button", "data-gen": g.key.split(":")[0], "aria-pressed": "false" }, g.label);
    b.addEventListener("click", () => {
      state.gen = state.gen === b.dataset.gen ? "" : b.dataset.gen;
      changed();
    });
    generators.append(b);
  }
  for (const f of catalogue.formats) $("format").append(el("option", { value: f }, f));
  for (const m of catalogue.modes) $("mode").append(el("option", { value: m.key }, `${m.key}: ${m.label}`));
  for (const o of catalogue.orders) {
    const id = "order-" + o.key;
    const label = el("label", { for: id, title: `${o.explanation} (schedule: ${o.schedule})` });
    const box = el("input", { type: "checkbox", id, value: o.key });
    box.addEventListener("change", () => {
      state.orders = catalogue.orders.map((x) => x.key).filter((k) => $("order-" + k).checked);
      changed();
    });
    label.append(box, document.createTextNode(o.label));
    $("orders").append(label);
  }
  $("numbers").addEventListener("input", () => { state.numbers = $("numbers").value; state.gen = ""; changed(); });
  $("gen-count").addEventListener("input", () => { state.count = Number($("gen-count").value) || 1; if (state.gen) changed(); });
  $("seed").addEventListener("input", () => { state.seed = Number($("seed").value) || 0; if (state.gen) changed(); });
  $("format").addEventListener("change", () => { state.format = $("format").value; $("format-other").value = ""; changed(); });
  $("format-other").addEventListener("input", () => {
    const v = $("format-other").value.trim();
    state.format = v || $("format").value;
    changed();
  });
  $("mode").addEventListener("change", () => { state.mode = $("mode").value; changed(); });
  $("custom").addEventListener("input", () => { state.custom = $("custom").value.trim(); changed(); });
  $("impl-seed").addEventListener("input", () => {
    state.impl_seed = Number($("impl-seed").value);
    $("impl-seed-value").textContent = state.impl_seed;
    changed(80);
  });
  $("tree-order").addEventListener("change", () => { state.tree = $("tree-order").value; writeAddress(); drawTree(); });
  $("controls").addEventListener("submit", (e) => e.preventDefault());
}

function showState() {
  $("numbers").value = state.numbers;
  $("gen-count").value = state.count;
  $("seed").value = state.seed;
  const listed = catalogue.formats.includes(state.format);
  $("format").value = listed ? state.format : "fp32";
  $("format-other").value = listed ? "" : state.format;
  $("mode").value = state.mode;
  for (const o of catalogue.orders) $("order-" + o.key).checked = state.orders.includes(o.key);
  $("custom").value = state.custom;
  $("impl-seed").value = state.impl_seed;
  $("impl-seed-value").textContent = state.impl_seed;
  for (const b of $("generators").children) b.setAttribute("aria-pressed", String(b.dataset.gen === state.gen));
}

function changed(delay = 250) {
  showState();
  writeAddress();
  clearTimeout(timer);
  timer = setTimeout(ask, delay);
}

function status(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

// ---- asking the server ----
async function ask() {
  if (!state.gen && state.numbers.length > catalogue.limits.characters) {
    status(`That is ${state.numbers.length.toLocaleString()} characters; the page takes at most ` +
           `${catalogue.limits.characters.toLocaleString()} (about ${catalogue.limits.terms.toLocaleString()} numbers). ` +
           "Use fplab reduce --file for more.", true);
    return;
  }
  const request = {
    format: state.format, mode: state.mode, orders: state.orders, custom: state.custom,
    impl_seed: state.impl_seed, seed: state.seed, runs: 200,
  };
  if (state.gen) request.gen = `${state.gen}:${state.count}`; else request.numbers = state.numbers;
  if (inFlight) inFlight.abort();
  const controller = new AbortController();
  inFlight = controller;
  const timeout = setTimeout(() => controller.abort("timeout"), 20000);
  status("Adding…");
  try {
    const response = await fetch("/api/explain", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(request),
      signal: controller.signal,
    });
    const body = await response.json();
    if (!response.ok) { status(body.error || `The server answered ${response.status}.`, true); return; }
    answer = body;
    if (state.gen) { state.numbers = answer.terms.join(" "); $("numbers").value = state.numbers; }
    status(`${answer.count} numbers in ${answer.format}, rounding ${answer.mode}` +
           (answer.inputs_rounded ? ` (${answer.inputs_rounded} were not ${answer.format} values and were rounded to nearest first)` : ""));
  } catch (e) {
    if (controller.signal.aborted && controller.signal.reason !== "timeout") return;  // superseded
    status(controller.signal.reason === "timeout" ? "The server took more than 20 s; try fewer numbers."
                                                  : "Cannot reach fplab serve: is it still running?", true);
    return;
  } finally {
    clearTimeout(timeout);
    if (inFlight === controller) inFlight = null;
  }
  render();
}

// ---- drawing the answer ----
function ulpsText(u) { return u === null ? "overflow" : (u > 0 ? "+" : "") + Number(u.toPrecision(4)); }

function render() {
  const tbody = $("results").querySelector("tbody");
  tbody.replaceChildren();
  const exact = el("tr", { class: "exact" });
  exact.append(el("th", { scope: "row" }, "Exact sum"), el("td", { class: "num" }, answer.exact_text.length > 60 ? answer.exact.toString() + " (approx.)" : answer.exact_text),
               el("td", { class: "num" }, "0"), el("td", { class: "num" }, "0"));
  tbody.append(exact);
  const best = el("tr");
  best.append(el("th", { scope: "row" }, `Exact, rounded once to ${answer.format}`),
              el("td", { class: "num" }, answer.correctly_rounded_overflow ? "overflow" : answer.correctly_rounded_text),
              el("td", { class: "num" }, ""), el("td", { class: "num" }, "best possible"));
  tbody.append(best);
  for (const o of answer.orders) {
    const row = el("tr", { "data-order": o.key });
    const name = el("th", { scope: "row", title: `${o.explanation}; schedule ${o.schedule}` }, o.label);
    if (o.error_message) {
      row.append(name, el("td", { class: "num value" }, "—"), el("td", { colspan: "2" }, o.error_message));
      tbody.append(row);
      continue;
    }
    const cls = o.correctly_rounded ? "good" : "bad";
    row.append(name, el("td", { class: "num value" }, o.value_text),
               el("td", { class: "num" }, o.error === null ? "overflow" : String(Number(o.error.toPrecision(6)))),
               el("td", { class: "num ulps " + cls }, ulpsText(o.ulps) + (o.correctly_rounded ? " ✓" : "")));
    tbody.append(row);
  }
  $("why").textContent = answer.why;

  const select = $("tree-order");
  select.replaceChildren();
  for (const o of answer.orders) if (!o.error_message) select.append(el("option", { value: o.key }, o.label));
  if (!answer.orders.some((o) => o.key === state.tree && !o.error_message))
    state.tree = (answer.orders.find((o) => !o.error_message) || { key: "" }).key;
  select.value = state.tree;
  drawTree();
  drawHistograms();
}

function drawTree() {
  const tree = $("tree");
  tree.replaceChildren();
  $("step-detail").textContent = "";
  $("steps").replaceChildren();
  const order = answer.orders.find((o) => o.key === state.tree);
  if (!order || !order.trace) {
    tree.append(el("p", {}, `The tree is drawn for at most ${catalogue.limits.traced_terms} numbers.`));
    return;
  }
  const steps = order.trace.steps;
  const n = answer.terms.length;
  const dx = 78, dy = 62, top = 24;
  const depth = Math.max(1, ...steps.map((s) => s.depth));
  const pos = {};
  for (let i = 0; i < n; i++) pos["t" + i] = { x: 44 + i * dx, y: top + depth * dy + 10 };
  for (const s of steps) {
    const xs = s.operands.map((o) => pos[o.name].x);
    pos[s.step] = { x: xs.reduce((a, b) => a + b, 0) / xs.length, y: top + (depth - s.depth) * dy + 10 };
  }
  const width = 88 + (n - 1) * dx, height = top + depth * dy + 50;
  const svg = el("svg:svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "group",
                              "aria-label": `Reduction tree of ${order.label}: ${n} terms, ${steps.length} rounding steps` });
  for (const s of steps)
    for (const o of s.operands)
      svg.append(el("svg:line", { x1: pos[o.name].x, y1: pos[o.name].y, x2: pos[s.step].x, y2: pos[s.step].y }));
  const short = (t) => (t.length > 10 ? Number(t).toPrecision(4) : t);
  for (let i = 0; i < n; i++) {
    const p = pos["t" + i];
    const g = el("svg:g", { class: "node term", tabindex: "0", role: "button",
                            "aria-label": `term t${i}: ${answer.terms[i]}` });
    g.append(el("svg:rect", { x: p.x - 36, y: p.y - 11, width: 72, height: 22, rx: 3 }),
             el("svg:text", { x: p.x, y: p.y + 4, "text-anchor": "middle" }, short(answer.terms[i])),
             el("svg:text", { x: p.x, y: p.y + 24, "text-anchor": "middle" }, "t" + i));
    g.addEventListener("click", () => detail(`t${i} = ${answer.terms[i]} (an input, as a ${answer.format} value)`, g));
    svg.append(g);
  }
  steps.forEach((s) => {
    const p = pos[s.step];
    const lost = s.error !== 0;
    const g = el("svg:g", { class: "node step", tabindex: "0", role: "button",
                            "aria-label": `step ${s.step}: ${stepSentence(s)}` });
    if (s.kind === "addition") g.append(el("svg:circle", { cx: p.x, cy: p.y, r: 13 }));
    else g.append(el("svg:rect", { x: p.x - 20, y: p.y - 13, width: 40, height: 26, rx: 8 }));
    g.append(el("svg:text", { x: p.x, y: p.y + 4, "text-anchor": "middle" }, s.kind === "addition" ? "+" : "Σ"),
             el("svg:text", { x: p.x + 17, y: p.y - 10 }, short(s.value_text)));
    const dropped = short(s.error_text);
    if (lost) g.append(el("svg:text", { x: p.x + 17, y: p.y + 16, class: "lost" }, (s.error > 0 && dropped[0] !== "+" ? "+" : "") + dropped));
    g.addEventListener("click", () => detail(stepDetail(s), g));
    svg.append(g);
  });
  for (const g of svg.querySelectorAll(".node"))
    g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); g.dispatchEvent(new Event("click")); } });
  tree.append(svg);
  stepTable(steps);
}

function stepSentence(s) {
  const operands = s.operands.map((o) => `${o.name} = ${o.value_text}`).join(", ");
  return `${s.label} of ${operands}: exact ${shorten(s.exact_text)}, rounded to ${s.value_text}, dropped ${s.error_text}`;
}
function shorten(t) { return t.length > 40 ? t.slice(0, 38) + "…" : t; }

function stepDetail(s) {
  let text = `${s.step} = ${s.operands.map((o) => o.name).join(" + ")}\n` +
             `  operands  ${s.operands.map((o) => o.value_text).join(", ")}\n` +
             `  exact     ${s.exact_text}\n  rounded   ${s.value_text} (${answer.format}, ${answer.mode})\n` +
             `  dropped   ${s.error_text}`;
  if (s.kind === "fused" && s.aligned) {
    text += `\n  a fused step: every term aligned to the grid 2^${s.grid_exponent}, the bits below it cut:`;
    for (const a of s.aligned) text += `\n    ${a.name.padEnd(5)} ${String(a.input).padEnd(22)} kept ${String(a.kept).padEnd(22)} cut ${a.dropped}`;
  }
  return text;
}

function detail(text, node) {
  for (const g of $("tree").querySelectorAll(".node.selected")) g.classList.remove("selected");
  node.classList.add("selected");
  $("step-detail").textContent = text;
}

function stepTable(steps) {
  const table = el("table");
  table.append(el("caption", {}, "Every rounding in the order it ran (tN: term N; sN: the result of step N)"));
  const head = el("tr");
  for (const h of ["Step", "Inputs", "Operands", "Exact", "Rounded", "Dropped"]) head.append(el("th", { scope: "col" }, h));
  const thead = el("thead");
  thead.append(head);
  table.append(thead);
  const body = el("tbody");
  for (const s of steps) {
    const row = el("tr");
    row.append(el("th", { scope: "row" }, s.step), el("td", {}, s.operands.map((o) => o.name).join(" + ")),
               el("td", { class: "num" }, s.operands.map((o) => o.value_text).join(", ")),
               el("td", { class: "num" }, shorten(s.exact_text)), el("td", { class: "num" }, s.value_text),
               el("td", { class: "num" }, s.error_text));
    body.append(row);
  }
  table.append(body);
  $("steps").append(table);
}

function drawHistograms() {
  const box = $("histogram");
  box.replaceChildren();
  const noisy = answer.orders.filter((o) => o.histogram);
  $("histogram-section").hidden = noisy.length === 0;
  for (const o of noisy) {
    const h = o.histogram;
    $("impl-seed").max = String(h.runs - 1);
    box.append(el("h3", {}, `${o.label}: ${h.bins.length} different result${h.bins.length === 1 ? "" : "s"} over ${h.runs} runs`));
    const most = Math.max(...h.bins.map((b) => b.count));
    const rowH = 20, width = 560, labelW = 230;
    const shownBins = h.bins.slice(0, 40);
    const svg = el("svg:svg", { width, viewBox: `0 0 ${width} ${shownBins.length * rowH + 4}`, role: "img",
                                "aria-label": `Histogram of ${o.label} over ${h.runs} runs: ` +
                                  shownBins.map((b) => `${b.value_text} ${b.count} times`).join(", ") });
    shownBins.forEach((b, i) => {
      const y = i * rowH + 2;
      const w = Math.max(2, ((width - labelW - 60) * b.count) / most);
      svg.append(el("svg:text", { x: 0, y: y + 14 }, `${b.value_text} (${ulpsText(b.ulps)})`),
                 el("svg:rect", { x: labelW, y, width: w, height: rowH - 4, class: "bar" + (b.value_text === o.value_text ? " shown" : "") }),
                 el("svg:text", { x: labelW + w + 6, y: y + 14 }, String(b.count)));
    });
    box.append(svg);
    if (h.bins.length > 40) box.append(el("p", {}, `… and ${h.bins.length - 40} more results.`));
  }
}

async function start() {
  readAddress();
  try {
    catalogue = await (await fetch("/api/catalogue")).json();
  } catch (e) {
    status("Cannot reach fplab serve: start it with `fplab serve` and open the address it prints.", true);
    return;
  }
  buildControls();
  // An address pasted or edited by hand (a shared state) while the page is open.
  window.addEventListener("hashchange", () => { readAddress(); changed(0); });
  changed(0);
}
start();
