// The bar (what is live at the peak) and the step timeline, drawn in SVG,
// and the tables of the pieces. Each chart is drawn in the element's own
// pixel size (viewBox = its CSS box), so its text is the same size in CSS
// pixels at any width; it is drawn again when that width changes.

function svg(name, attributes, text) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", name);
  for (const [k, v] of Object.entries(attributes)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// Text sizes of the charts, in CSS pixels at every width.
const CHART_TEXT_PX = 12;
const CHART_TICK_PX = 11;

// One line each: what a piece of memory is.
const EXPLAIN = {
  overhead: "The CUDA context, the kernels loaded and the allocator's own blocks: held by the process before any tensor, and not in the steady total.",
  weights: "The model's parameters in the dtype they are kept in for training (a quantized base: its 4- or 8-bit storage).",
  master_weights: "An fp32 copy of the weights that mixed precision updates; the low-precision weights are cast from it.",
  gradients: "One gradient per trainable parameter, written in backward and read by the optimizer step.",
  optimizer_states: "What the optimizer keeps per trainable parameter between steps (Adam: the two moments).",
  activations: "Tensors forward saves for backward: they grow with the micro-batch and the sequence length, and are freed layer by layer in backward.",
  temporaries: "Short-lived buffers live at the peak but not held through the step: the loss's fp32 logits and their gradients, a recomputed layer, the optimizer step's scratch, gathered ZeRO-3/FSDP layers.",
};

function unitName(units) { return unitOf(units)[1]; }

// A number in the report's unit, without the unit's name.
function amount(bytes, units) {
  const [scale] = unitOf(units);
  const n = bytes / scale;
  return (n >= 100 ? n.toFixed(1) : n.toFixed(2));
}

// A piece's name that says what it is: a title on hover, and a
// disclosure that Tab and a tap open.
function explained(name, kind) {
  const text = EXPLAIN[kind];
  if (!text) return document.createTextNode(name);
  const d = element("details", { class: "explain" });
  const summary = element("summary", { title: text }, name);
  d.append(summary, element("span", { class: "why" }, text));
  return d;
}

// The pieces per GPU: each one's steady size and what of it is live at
// the peak, the steady total and the peak both named, so that the rows at
// the peak add up to the bar.
function table(node, e, units) {
  const memory = e.memory;
  const atPeak = peakKinds(e);
  node.tHead.textContent = ""; node.tBodies[0].textContent = "";
  const unit = unitName(units);
  node.caption.textContent = `Memory per GPU, in ${unit} (${unit === "GB" ? "10⁹" : "2³⁰"} bytes)`;
  const head = element("tr");
  for (const [h, title] of [["piece", ""], ["dtype", "the dtype it is kept in"], ["steady", `its size, ${unit}`], ["at the peak", `what of it is live at the peak, ${unit}`], ["share", "share of the peak"]]) head.append(element("th", { scope: "col", title }, h));
  node.tHead.append(head);
  const dtypes = e.dtypes || {};
  const dtypeOf = { weights: dtypes.weights, master_weights: dtypes.master_weights, gradients: dtypes.gradients, optimizer_states: dtypes.optimizer_states, activations: e.precision ? e.precision.activations : undefined };
  for (const [k, name] of PIECES) {
    const steady = k === "overhead" || k === "temporaries" ? null : memory[k];
    const live = atPeak[k] || 0;
    if (!steady && !live) continue;
    const tr = element("tr", { "data-kind": k });
    const first = element("th", { scope: "row" }); first.append(explained(name, k));
    const liveCell = element("td", { "data-at-peak": String(live) }, amount(live, units));
    tr.append(first, element("td", {}, dtypeOf[k] && dtypeOf[k] !== "-" ? dtypeOf[k] : "–"), element("td", {}, steady === null ? "–" : amount(steady, units)), liveCell,
      element("td", {}, memory.peak ? Math.round(100 * live / memory.peak) + "%" : "–"));
    node.tBodies[0].append(tr);
  }
  const phase = e.timeline ? e.timeline.peak.phase : null;
  const totals = [
    ["steady total", memory.total, null, "steady"],
    [`peak of a step${phase ? " (" + phase + ")" : ""}`, null, memory.peak, "peak"],
    ["reserved by the allocator", null, memory.reserved, "reserved"],
  ];
  for (const [name, steady, live, key] of totals) {
    const tr = element("tr", { class: "total", "data-total": key });
    tr.append(element("th", { scope: "row" }, name), element("td", {}, ""), element("td", {}, steady === null ? "" : amount(steady, units)), element("td", {}, live === null ? "" : amount(live, units)),
      element("td", {}, live === null ? "" : Math.round(100 * live / memory.peak) + "%"));
    node.tBodies[0].append(tr);
  }
  const gap = memory.total - memory.peak;
  $("pieces-hint").textContent = `The steady total adds the five pieces as if all were held at once (${size(memory.total, units)}); the peak of a step (${size(memory.peak, units)}) is the most live at one moment${phase ? ", in " + phase : ""}: activations are freed in backward as gradients appear, temporaries come and go, and the CUDA overhead is counted there. What the allocator reserves (${size(memory.reserved, units)}) is what the GPU must hold. ` +
    (gap >= 0 ? `Here the peak is ${size(gap, units)} below the steady total.` : `Here the peak is ${size(-gap, units)} above the steady total (temporaries and the overhead).`);
}

// Host (CPU) memory: the API's figures are per node, for every process on it.
function hostTable(node, e, units) {
  const host = e.host;
  const processes = Math.max(1, Math.round(e.parallelism.gpus / Math.max(1, e.parallelism.nodes)));
  node.caption.textContent = `Host (CPU) memory per node, for its ${processes} GPU process${processes > 1 ? "es" : ""}`;
  node.tHead.textContent = ""; node.tBodies[0].textContent = "";
  const unit = unitName(units);
  const head = element("tr");
  for (const h of ["piece", `per node (${unit})`, `per process (${unit})`]) head.append(element("th", { scope: "col" }, h));
  node.tHead.append(head);
  for (const [k, name] of PIECES.concat([["total", "total"]])) {
    if (!host[k]) continue;
    const tr = element("tr", { "data-kind": k });
    const first = element("th", { scope: "row" }); first.append(explained(name, k));
    tr.append(first, element("td", {}, amount(host[k], units)), element("td", {}, amount(host[k] / processes, units)));
    node.tBodies[0].append(tr);
  }
}

// What is live at the peak, piece by piece.
function peakKinds(e) {
  return e.timeline ? e.timeline.peak.by_kind : { weights: e.memory.weights, master_weights: e.memory.master_weights, gradients: e.memory.gradients, optimizer_states: e.memory.optimizer_states, activations: e.memory.activations, overhead: e.overhead || 0 };
}

// A chart's width in CSS pixels (600 while it is not laid out).
function pixelWidth(node) { return Math.round(node.getBoundingClientRect().width) || 600; }

function clearChart(node) { node.querySelectorAll(":not(title)").forEach((n) => n.remove()); }

// A value shown in the readout when its part of a chart is focused or tapped.
function reachable(node, label) {
  node.setAttribute("tabindex", "0");
  node.setAttribute("role", "img");
  node.setAttribute("aria-label", label);
  node.append(svg("title", {}, label));
  const say = () => { $("readout").textContent = label; };
  node.addEventListener("focus", say);
  node.addEventListener("click", say);
}

// A text with a white halo, so that a line under it does not cross it.
function label(attributes, text) {
  return svg("text", Object.assign({ "paint-order": "stroke", stroke: "#fff", "stroke-width": 3, "stroke-linejoin": "round" }, attributes), text);
}

function drawBar(e, units, capacity, width) {
  const bar = $("bar");
  clearChart(bar);
  const W = width || pixelWidth(bar), H = 84;
  bar.setAttribute("viewBox", `0 0 ${W} ${H}`);
  bar.dataset.width = String(W);
  const kinds = peakKinds(e);
  const parts = PIECES.map(([k, name]) => [k, name, kinds[k] || 0]).filter(([, , b]) => b > 0);
  const drawn = parts.reduce((s, [, , b]) => s + b, 0);
  const scale = Math.max(drawn, capacity || 0) * 1.04 || 1;
  let x = 0;
  for (const [k, name, bytes] of parts) {
    const w = W * bytes / scale;
    const rect = svg("rect", { x: x.toFixed(2), y: 20, width: Math.max(w, 0.5).toFixed(2), height: 30, fill: `var(--${k})`, "data-kind": k, "data-bytes": bytes });
    reachable(rect, `${name}: ${size(bytes, units)} at the peak (${Math.round(100 * bytes / drawn)}%)`);
    bar.append(rect);
    x += w;
  }
  bar.dataset.drawnPeak = String(drawn);
  bar.append(label({ x: Math.min(Math.max(x, 4), W - 4).toFixed(1), y: 68, "text-anchor": x > W / 2 ? "end" : "start", "font-size": CHART_TEXT_PX, fill: "var(--ink)", class: "peak-label" }, `peak ${size(drawn, units)}`));
  if (capacity) {
    const cx = W * capacity / scale;
    bar.append(svg("line", { x1: cx, x2: cx, y1: 16, y2: 54, stroke: "var(--capacity)", "stroke-width": 2, "stroke-dasharray": "4 3", id: "capacity-line", class: "capacity-line" }));
    // Above the bar, beside the line's top, never on it.
    const right = cx > W / 2;
    bar.append(label({ x: (right ? cx - 4 : cx + 4).toFixed(1), y: 13, "text-anchor": right ? "end" : "start", "font-size": CHART_TICK_PX, fill: "var(--capacity)", id: "capacity-label", class: "capacity-label" }, `capacity ${size(capacity, units)}`));
  }
  const legend = $("legend"); legend.textContent = "";
  for (const [k, name, bytes] of parts) {
    const li = element("li", { title: EXPLAIN[k] || "" }); const i = element("i"); i.style.background = `var(--${k})`;
    li.append(i, document.createTextNode(`${name} ${size(bytes, units)}`)); legend.append(li);
  }
}

// A round step for about `count` ticks up to `top` bytes, in the units shown.
function tickStep(top, units, count) {
  const [scale] = unitOf(units);
  const raw = top / scale / count;
  const power = 10 ** Math.floor(Math.log10(raw || 1));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw) || 10 * power;
  return step * scale;
}

function drawTimeline(e, units, capacity, width) {
  const chart = $("timeline");
  clearChart(chart);
  const phases = e.timeline ? e.timeline.phases : [];
  if (!phases.length) return;
  const W = width || pixelWidth(chart), H = 180;
  chart.setAttribute("viewBox", `0 0 ${W} ${H}`);
  chart.dataset.width = String(W);
  const left = 64, right = 8, top = 26, bottom = 38;
  const plotW = W - left - right, plotH = H - top - bottom;
  const highest = Math.max(capacity || 0, ...phases.map((p) => p.peak)) * 1.06 || 1;
  const step = tickStep(highest, units, 4);
  const ceiling = Math.ceil(highest / step) * step;
  const y = (b) => top + plotH - plotH * b / ceiling;
  // The y axis: ticks with their values in the report's unit.
  const unit = unitName(units);
  for (let v = 0; v <= ceiling + step / 2; v += step) {
    chart.append(svg("line", { x1: left, x2: W - right, y1: y(v), y2: y(v), stroke: "#e6e9ed", "stroke-width": 1 }));
    chart.append(svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end", "font-size": CHART_TICK_PX, fill: "var(--muted)", class: "tick" }, `${+(v / unitOf(units)[0]).toFixed(2)} ${unit}`));
  }
  chart.append(svg("line", { x1: left, x2: left, y1: top, y2: top + plotH, stroke: "var(--muted)", "stroke-width": 1 }));
  chart.append(svg("text", { x: left + plotW / 2, y: H - 4, "text-anchor": "middle", "font-size": CHART_TICK_PX, fill: "var(--muted)", class: "axis-title" }, `phase of the step (memory per GPU, ${unit})`));
  const band = plotW / phases.length;
  phases.forEach((p, i) => {
    const x = left + i * band;
    const g = svg("g", { "data-phase": p.phase });
    g.append(svg("rect", { x: x + 4, y: y(p.peak), width: Math.max(band - 8, 1), height: top + plotH - y(p.peak), fill: "#c9d6e8" }));
    g.append(svg("polyline", { points: `${x + 4},${y(p.start)} ${x + band / 2},${y(p.peak)} ${x + band - 4},${y(p.end)}`, fill: "none", stroke: "var(--accent)", "stroke-width": 2 }));
    g.append(svg("text", { x: x + band / 2, y: top + plotH + 15, "text-anchor": "middle", "font-size": CHART_TICK_PX, fill: "var(--muted)", class: "phase-label" }, p.phase));
    reachable(g, `${p.phase}: starts at ${size(p.start, units)}, peaks at ${size(p.peak, units)}, ends at ${size(p.end, units)}`);
    chart.append(g);
  });
  if (capacity) {
    const cy = y(capacity);
    chart.append(svg("line", { x1: left, x2: W - right, y1: cy, y2: cy, stroke: "var(--capacity)", "stroke-width": 2, "stroke-dasharray": "4 3", class: "capacity-line" }));
    // Its key above the plot, where no phase is drawn: a dash and its label.
    chart.append(svg("line", { x1: left, x2: left + 22, y1: 9, y2: 9, stroke: "var(--capacity)", "stroke-width": 2, "stroke-dasharray": "4 3" }));
    chart.append(svg("text", { x: left + 28, y: 13, "font-size": CHART_TICK_PX, fill: "var(--capacity)", class: "capacity-label" }, `capacity ${size(capacity, units)}`));
  }
}

// The answer's charts, drawn once the frame that paints its figures and
// table is out: their widths are then read from that frame's layout, at no
// cost. Resolves when they are drawn (or when a newer answer took over).
function chartsAfterFrame(e, units, capacity) {
  const mine = ++chartsWaiting;
  return afterFrame().then(() => {
    if (mine !== chartsWaiting) return;
    chartsWaiting = 0;
    if (!last || last.e !== e) return;
    const barWidth = pixelWidth($("bar")), timelineWidth = pixelWidth($("timeline"));
    drawBar(e, units, capacity, barWidth);
    drawTimeline(e, units, capacity, timelineWidth);
  });
}

// The charts follow their width: drawn again, at the same text size, when
// it changes (a phone turned, a window resized); not while a drawing waits
// for its frame (the answer just shown changed the width: that drawing
// reads it).
const chartWidths = new ResizeObserver(() => {
  if (!last || chartsWaiting) return;
  const capacity = last.e.capacity ? last.e.capacity.bytes : null;
  const units = last.r.units || "gb";
  if (String(pixelWidth($("bar"))) !== $("bar").dataset.width) drawBar(last.e, units, capacity);
  if (String(pixelWidth($("timeline"))) !== $("timeline").dataset.width) drawTimeline(last.e, units, capacity);
});
chartWidths.observe($("bar"));
chartWidths.observe($("timeline"));
