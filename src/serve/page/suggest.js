// "What would make it fit": the advisor's answers (`POST /api/techniques`).

// The advisor's answers, from `trainmem techniques` on the same request:
// each applies alone to the run shown (its `keys` set on this setup, not
// on top of another answer), with what it costs.
async function suggest(e, r) {
  const mine = ++fitGeneration;
  const section = $("fit-section");
  const list = $("fit");
  list.textContent = "";
  section.classList.add("hidden");
  if (e.fits !== false || !r["micro-batch"] || !r["seq-len"] || !e.activations_estimated) return;
  await catalogued;
  if (mine !== fitGeneration) return;
  try {
    const response = await fetch("/api/techniques", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(r) });
    if (mine !== fitGeneration || !response.ok) return;
    const ladder = await response.json();
    if (mine !== fitGeneration) return;
    const units = r.units || "gb";
    const base = ladder.rungs[0];
    let gpusOffered = 0;
    for (const rung of ladder.rungs.slice(1)) {
      const keys = rung.keys || {};
      if (keys.gpus) gpusOffered = Math.max(gpusOffered, Number(keys.gpus));
      list.append(suggestion(rung, base, units));
    }
    // The layout search, for the GPUs of this run or the most offered.
    const gpus = Math.max(e.parallelism.gpus, gpusOffered);
    if (gpus > 1) {
      const li = element("li", { class: "open-plan" });
      const button = element("button", { type: "button", id: "fit-open-plan" }, "Open in plan");
      button.addEventListener("click", () => openPlan(gpus));
      li.append(button, document.createTextNode(` every layout of ${gpus} GPUs that fits (sharding, tensor and pipeline parallelism, recomputation), fastest first`));
      list.append(li);
    }
    section.classList.toggle("hidden", !list.children.length);
  } catch {
    // The suggestions are extra: the answer above stands without them.
  }
}

// One answer: its changes, its peak with the signed change, its verdict,
// and its costs: the step time, host memory, and what it gives up.
function suggestion(rung, base, units) {
  const li = element("li", { "data-peak": String(rung.peak) });
  const keys = rung.keys || {};
  // A change the page has no control for is shown with its flags only.
  const applicable = Object.keys(keys).length > 0 && Object.keys(keys).every((k) => $(k));
  const button = element("button", { type: "button" }, "Apply");
  button.setAttribute("aria-label", `Apply ${rung.technique}`);
  if (applicable) button.addEventListener("click", () => applyChange(keys));
  else { button.disabled = true; button.title = "this page has no control for " + rung.flags.join(" "); }
  const sign = rung.change < 0 ? "−" : rung.change > 0 ? "+" : "±";
  const verdict = rung.fits ? "fits" : rung.fits_allocated ? "tight" : "over";
  const costs = [];
  if (base && rung.step_time_s && base.step_time_s) {
    const ratio = rung.step_time_s / base.step_time_s - 1;
    const change = Math.abs(ratio) < 0.005 ? "the same" : (ratio > 0 ? "+" : "−") + Math.round(100 * Math.abs(ratio)) + "%";
    costs.push(`step ${seconds(rung.step_time_s)} (${change})`);
  }
  if (base && rung.host - base.host >= 1e6) costs.push(`host memory +${size(rung.host - base.host, units)} per node`);
  costs.push(...rung.costs);
  li.append(button, document.createTextNode(" "), element("strong", {}, rung.technique), document.createTextNode(`: peak ${size(rung.peak, units)} (${sign}${size(Math.abs(rung.change), units)}) `),
    element("span", { class: verdict }, verdict), element("span", { class: "costs" }, ` · gives up: ${rung.category} · ${costs.join(" · ")}`),
    element("code", { class: "flags" }, rung.flags.join(" ")));
  li.dataset.verdict = verdict;
  li.dataset.keys = JSON.stringify(keys);
  return li;
}

// A change applied to the setup shown, as a new entry of the page's
// history: Back returns to the setup before it (the link holds it).
function applyChange(keys) {
  for (const [key, value] of Object.entries(keys)) applyKey(key, value);
  history.pushState(null, "", linkState(request()));
  schedule();
}

// One key of a change on its control: --zero and --fsdp exclude each other.
function applyKey(key, value) {
  if (key === "zero") setValue("fsdp", "");
  if (key === "fsdp") setValue("zero", "");
  setValue(key, value === true ? true : String(value));
}

// `["--recompute", "full"]` or `["--optimizer-in-backward"]` set on the controls.
function applyFlags(flags) {
  for (let i = 0; i < flags.length; i++) {
    const key = flags[i].replace(/^--/, "");
    const next = flags[i + 1];
    if (next === undefined || next.startsWith("--")) applyKey(key, true);
    else { applyKey(key, next); i++; }
  }
}
