// A pinned setup beside the one shown.

function drawCompare() {
  const node = $("compare");
  node.classList.toggle("hidden", !pinned || !last);
  $("unpin").classList.toggle("hidden", !pinned);
  if (!pinned || !last) return;
  const units = last.r.units || "gb";
  node.tHead.textContent = ""; node.tBodies[0].textContent = "";
  const head = element("tr");
  for (const h of ["piece", "pinned", "now", "difference"]) head.append(element("th", { scope: "col" }, h));
  node.tHead.append(head);
  for (const [k, name] of [["weights", "weights"], ["master_weights", "master weights"], ["gradients", "gradients"], ["optimizer_states", "optimizer states"], ["activations", "activations"], ["peak", "peak of a step"]]) {
    const a = pinned.e.memory[k], b = last.e.memory[k];
    const tr = element("tr");
    tr.append(element("td", {}, name), element("td", {}, size(a, units)), element("td", {}, size(b, units)), element("td", {}, (b >= a ? "+" : "−") + size(Math.abs(b - a), units)));
    if (k === "peak") tr.dataset.difference = String(b - a);
    node.tBodies[0].append(tr);
  }
}
