// The bar (what is live at the peak) and the step timeline, drawn in SVG,
// and the table of the pieces.

function svg(name, attributes, text) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", name);
  for (const [k, v] of Object.entries(attributes)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function table(node, memory, units, heading) {
  node.tHead.textContent = ""; node.tBodies[0].textContent = "";
  const head = element("tr"); head.append(element("th", { scope: "col" }, "piece"), element("th", { scope: "col" }, heading), element("th", { scope: "col" }, "share"));
  node.tHead.append(head);
  const rows = [["weights", memory.weights], ["master weights", memory.master_weights], ["gradients", memory.gradients], ["optimizer states", memory.optimizer_states], ["activations", memory.activations], ["total (steady)", memory.total], ["peak of a step", memory.peak]];
  for (const [name, bytes] of rows) {
    const tr = element("tr");
    tr.append(element("td", {}, name), element("td", {}, size(bytes, units)), element("td", {}, memory.peak ? Math.round(100 * bytes / memory.peak) + "%" : "-"));
    node.tBodies[0].append(tr);
  }
}

function drawBar(e, units, capacity) {
  const bar = $("bar");
  bar.querySelectorAll(":not(title)").forEach((n) => n.remove());
  const kinds = e.timeline ? e.timeline.peak.by_kind : { weights: e.memory.weights, master_weights: e.memory.master_weights, gradients: e.memory.gradients, optimizer_states: e.memory.optimizer_states, activations: e.memory.activations, overhead: e.overhead || 0 };
  const parts = PIECES.map(([k, name]) => [k, name, kinds[k] || 0]).filter(([, , b]) => b > 0);
  const drawn = parts.reduce((s, [, , b]) => s + b, 0);
  const scale = Math.max(drawn, capacity || 0) * 1.04 || 1;
  const W = 600;
  let x = 0;
  for (const [k, name, bytes] of parts) {
    const w = W * bytes / scale;
    const rect = svg("rect", { x: x.toFixed(2), y: 14, width: Math.max(w, 0.5).toFixed(2), height: 34, fill: `var(--${k})`, "data-kind": k, "data-bytes": bytes });
    rect.append(svg("title", {}, `${name}: ${size(bytes, units)}`));
    bar.append(rect);
    x += w;
  }
  bar.dataset.drawnPeak = String(drawn);
  bar.append(svg("text", { x: Math.min(x, W - 4).toFixed(1), y: 62, "text-anchor": x > W / 2 ? "end" : "start", "font-size": 12, fill: "#1f2328" }, `peak ${size(drawn, units)}`));
  if (capacity) {
    const cx = W * capacity / scale;
    bar.append(svg("line", { x1: cx, x2: cx, y1: 4, y2: 52, stroke: "#1f2328", "stroke-width": 2, "stroke-dasharray": "4 3", id: "capacity-line" }));
    bar.append(svg("text", { x: Math.min(cx, W - 4), y: 11, "text-anchor": cx > W / 2 ? "end" : "start", "font-size": 11, fill: "#1f2328" }, `capacity ${size(capacity, units)}`));
  }
  const legend = $("legend"); legend.textContent = "";
  for (const [k, name, bytes] of parts) {
    const li = element("li"); const i = element("i"); i.style.background = `var(--${k})`;
    li.append(i, document.createTextNode(`${name} ${size(bytes, units)}`)); legend.append(li);
  }
}

function drawTimeline(e, units, capacity) {
  const chart = $("timeline");
  chart.querySelectorAll(":not(title)").forEach((n) => n.remove());
  const phases = e.timeline ? e.timeline.phases : [];
  if (!phases.length) return;
  const top = Math.max(capacity || 0, ...phases.map((p) => p.peak)) * 1.05 || 1;
  const W = 600, H = 95, step = W / phases.length;
  const y = (b) => H - H * b / top + 4;
  phases.forEach((p, i) => {
    const x = i * step;
    const g = svg("g", { "data-phase": p.phase });
    g.append(svg("rect", { x: x + 6, y: y(p.peak), width: step - 12, height: H + 4 - y(p.peak), fill: "#c9d6e8" }));
    g.append(svg("polyline", { points: `${x + 6},${y(p.start)} ${x + step / 2},${y(p.peak)} ${x + step - 6},${y(p.end)}`, fill: "none", stroke: "#2f5f98", "stroke-width": 2 }));
    g.append(svg("text", { x: x + step / 2, y: 116, "text-anchor": "middle", "font-size": 11, fill: "#57606a" }, p.phase));
    g.append(svg("title", {}, `${p.phase}: starts at ${size(p.start, units)}, peaks at ${size(p.peak, units)}, ends at ${size(p.end, units)}`));
    chart.append(g);
  });
  if (capacity) chart.append(svg("line", { x1: 0, x2: W, y1: y(capacity), y2: y(capacity), stroke: "#b42318", "stroke-dasharray": "4 3" }));
}
