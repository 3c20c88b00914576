// The plan panel: GPUs and a device in, the top layouts of `trainmem plan`
// (`POST /api/plan`) out, one click applies a layout to the settings.

// The axes the page searches are `trainmem plan`'s own default (every
// axis but offload): the page has a control for each flag a layout sets.

// The settings a layout sets: left out of the plan's request (a typed one
// would fix its axis), and put back to their defaults before a layout is
// applied. The micro-batch and accumulation are the training's, kept.
const LAYOUT_KEYS = ["framework", "zero", "fsdp", "tp", "pp", "cp", "ep", "sequence-parallel", "offload", "recompute", "recompute-every", "loss", "offload-activations"];

// Layouts shown: the fastest few.
const PLAN_SHOWN = 5;

let planGeneration = 0;

// "GPUs in all: 2" with no sharding: every GPU holds a full copy.
function planHint(e, r) {
  const p = e.parallelism;
  const copies = p.gpus > 1 && p.zero === "0" && p.tensor === 1 && p.pipeline === 1;
  $("shard-hint").classList.toggle("hidden", !copies);
  if (!copies) return;
  $("shard-text").textContent = `${p.gpus} GPUs, each holds a full copy of the weights, gradients and optimizer states: shard them with ZeRO or FSDP.`;
  $("shard-plan").textContent = `Plan layouts for ${p.gpus} GPUs`;
  $("shard-plan").onclick = () => openPlan(p.gpus);
}

// The panel opened on `gpus` GPUs of the device shown, and searched.
function openPlan(gpus) {
  const section = $("plan-section");
  section.open = true;
  $("plan-gpus").value = String(gpus);
  fillPlanDevices();
  section.scrollIntoView({ block: "nearest" });
  $("plan-run").focus();
  runPlan();
}

function fillPlanDevices() {
  const select = $("plan-device");
  const current = getValue("device");
  if (select.options.length !== devices.length) {
    select.textContent = "";
    for (const d of devices) select.append(new Option(`${d.name} (${(d.bytes / 1e9).toFixed(2)} GB)`, d.name));
  }
  if (current && current !== "custom" && devices.some((d) => d.name === current)) select.value = current;
}

// The plan's request: the settings shown, less the layout, on the panel's GPUs and device.
function planRequest() {
  const r = request();
  for (const k of LAYOUT_KEYS) delete r[k];
  delete r.capacity;
  r.gpus = Number($("plan-gpus").value);
  r.device = $("plan-device").value;
  return r;
}

async function runPlan() {
  const mine = ++planGeneration;
  const status = $("plan-status");
  const node = $("plan-table");
  node.classList.add("hidden");
  $("plan-command").classList.add("hidden");
  if (source === "config" && $("config").value.trim() === "") { status.textContent = "Paste a config.json or open the file first: the plan is searched for the model shown."; return; }
  const r = planRequest();
  status.textContent = "Searching the layouts…";
  document.body.dataset.planPending = "1";
  try {
    const response = await fetch("/api/plan", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(r) });
    const body = await response.json();
    if (mine !== planGeneration) return;
    if (!response.ok) { status.textContent = (body.error || "the server answered " + response.status).replace(/^error: /, ""); return; }
    showPlan(body, r);
  } catch (error) {
    if (mine === planGeneration) status.textContent = "The server did not answer: " + error.message;
  } finally {
    if (mine === planGeneration) document.body.dataset.planPending = "0";
  }
}

// The words of a layout: its flags, read.
function layoutWords(l) {
  const words = [];
  if (l.framework === "megatron") words.push("Megatron");
  if (l.zero !== "0") words.push(l.framework === "fsdp2" ? `FSDP ${l.hybrid ? "hybrid" : "sharded"} (stage ${l.zero})` : `ZeRO ${l.zero}${l.hybrid ? " (hybrid)" : ""}`);
  else words.push(l.data_parallel > 1 ? `data parallel ×${l.data_parallel}` : "no sharding");
  if (l.tp > 1) words.push(`tp ${l.tp}`);
  if (l.pp > 1) words.push(`pp ${l.pp}`);
  if (l.cp > 1) words.push(`cp ${l.cp}`);
  if (l.ep > 1) words.push(`ep ${l.ep}`);
  if (l.sequence_parallel) words.push("sequence parallel");
  if (l.recompute !== "none") words.push(`recompute ${l.recompute}${l.recompute_every > 1 ? " every " + l.recompute_every : ""}`);
  if (l.loss !== "standard") words.push(`${l.loss} loss`);
  words.push(`micro-batch ${l.micro_batch}`);
  return words.join(", ");
}

function showPlan(plan, r) {
  const units = r.units || "gb";
  const node = $("plan-table");
  node.tHead.textContent = ""; node.tBodies[0].textContent = "";
  const head = element("tr");
  for (const h of ["layout", `peak (${unitName(units)})`, "step time", "tokens/s", ""]) head.append(element("th", { scope: "col" }, h));
  node.tHead.append(head);
  const shown = plan.layouts.slice(0, PLAN_SHOWN);
  shown.forEach((layout, i) => {
    const tr = element("tr", { "data-peak": String(layout.peak), "data-flags": JSON.stringify(layout.flags) });
    const applicable = layout.flags.every((f) => !f.startsWith("--") || $(f.slice(2)));
    const button = element("button", { type: "button", "aria-label": `Apply layout ${i + 1}: ${layoutWords(layout.layout)}` }, "Apply");
    if (applicable) button.addEventListener("click", () => applyLayout(plan, layout));
    else { button.disabled = true; button.title = "this page has no control for " + layout.flags.join(" "); }
    const time = layout.step_time_s ? seconds(layout.step_time_s) : "–";
    const first = element("th", { scope: "row" }, layoutWords(layout.layout));
    first.append(element("code", { class: "flags" }, layout.flags.join(" ")));
    tr.append(first, element("td", {}, amount(layout.peak, units)), element("td", {}, time), element("td", {}, layout.tokens_per_s ? grouped(Math.round(layout.tokens_per_s)) : "–"));
    const cell = element("td"); cell.append(button); tr.append(cell);
    node.tBodies[0].append(tr);
  });
  node.classList.toggle("hidden", !shown.length);
  $("plan-status").textContent = shown.length
    ? `${plan.kept} of ${plan.candidates} layouts fit ${plan.gpus} × ${plan.capacity.label} with ${plan.headroom} headroom; the fastest ${shown.length} (step times approximate, as above).` + (plan.notes.length ? " " + plan.notes.join("; ") + "." : "")
    : `No layout of ${plan.gpus} GPUs fits (${plan.candidates} searched): try more GPUs or a larger GPU.`;
  const command = $("plan-command");
  command.textContent = ["trainmem", "plan"].concat(plan.base_flags.map((w) => quote(w))).join(" ");
  command.classList.remove("hidden");
}

// A layout applied: the plan's GPUs and device, the layout settings back
// to their defaults, then the layout's flags; a new history entry.
function applyLayout(plan, layout) {
  for (const s of SPECS) if (LAYOUT_KEYS.includes(s.key)) setValue(s.key, s.value);
  setValue("gpus", String(plan.gpus));
  setValue("device", $("plan-device").value);
  applyFlags(layout.flags);
  history.pushState(null, "", linkState(request()));
  schedule();
}

$("plan-run").addEventListener("click", runPlan);
$("plan-section").addEventListener("toggle", () => { if ($("plan-section").open) fillPlanDevices(); });
