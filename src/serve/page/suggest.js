// "What would make it fit": the advisor's answers (`POST /api/techniques`).

// The advisor's answers, from `trainmem techniques` on the same request:
// each applies alone to the run shown.
async function suggest(e, r) {
  const mine = ++fitGeneration;
  const section = $("fit-section");
  const list = $("fit");
  list.textContent = "";
  section.classList.add("hidden");
  if (e.fits !== false || !r["micro-batch"] || !r["seq-len"] || !e.activations_estimated) return;
  try {
    const response = await fetch("/api/techniques", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(r) });
    if (mine !== fitGeneration || !response.ok) return;
    const ladder = await response.json();
    if (mine !== fitGeneration) return;
    const units = r.units || "gb";
    for (const rung of ladder.rungs.slice(1)) {
      const li = element("li");
      const button = element("button", { type: "button" }, "Apply");
      button.setAttribute("aria-label", `Apply ${rung.technique}`);
      button.addEventListener("click", () => { applyFlags(rung.flags); schedule(); });
      const verdict = element("span", { class: rung.fits ? "fits" : "over" }, rung.fits ? "fits" : "over");
      const delta = (rung.change < 0 ? "-" : "+") + size(Math.abs(rung.change), units);
      li.append(button, document.createTextNode(` ${rung.technique}: peak ${size(rung.peak, units)} (${delta}; gives up: ${rung.category}; ${rung.costs.join("; ")}) `), verdict);
      li.dataset.peak = String(rung.peak);
      list.append(li);
    }
    section.classList.toggle("hidden", !list.children.length);
  } catch {
    // The suggestions are extra: the answer above stands without them.
  }
}

// `["--recompute", "full"]` or `["--optimizer-in-backward"]` set on the controls.
function applyFlags(flags) {
  for (let i = 0; i < flags.length; i++) {
    const key = flags[i].replace(/^--/, "");
    // --zero and --fsdp exclude each other, as on the command line.
    if (key === "zero") setValue("fsdp", "");
    if (key === "fsdp") setValue("zero", "");
    const next = flags[i + 1];
    if (next === undefined || next.startsWith("--")) setValue(key, true);
    else { setValue(key, next); i++; }
  }
}
