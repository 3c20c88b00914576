// Downloads (JSON, CSV, Markdown) and copying to the clipboard. Each
// download carries the model, the settings, the units and the verdict:
// JSON is the CLI's (`trainmem estimate --format json`), CSV and Markdown
// are human columns with the unit in their header.

function download(name, type, text) {
  const a = element("a", { href: URL.createObjectURL(new Blob([text], { type })), download: name });
  document.body.append(a); a.click(); a.remove();
}

// A line in the toolbar's status, where the buttons are.
function say(text) { $("share-status").textContent = text; }

// The verdict in words: the engine's `fits` on what the allocator reserves.
function verdictWords(e) {
  if (!e.capacity) return "no capacity given";
  return e.fits ? "fits" : e.fits_allocated ? "does not fit (tight: the allocated peak fits, the reserved memory does not)" : "does not fit";
}

// The settings as the page names them, in the form's order.
function settingRows(r) {
  return SPECS.filter((s) => s.key in r).map((s) => [s.label, r[s.key] === true ? "yes" : String(r[s.key])]);
}

// The pieces per GPU in the report's unit: [name, value, bytes].
function pieceRows(e, units) {
  const [scale] = unitOf(units);
  const m = e.memory;
  const rows = COMPARED.slice(0, 5).map(([k, name]) => [name, m[k]]);
  rows.push(["total (steady)", m.total], ["peak of a step", m.peak]);
  if (m.reserved !== undefined) rows.push(["reserved by the allocator", m.reserved]);
  if (e.capacity) rows.push(["capacity of one GPU", e.capacity.bytes]);
  return rows.map(([name, bytes]) => [name, (bytes / scale).toFixed(2), bytes]);
}

function csvField(text) { text = String(text); return /[",\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text; }

function csv() {
  const { e, r } = last;
  const units = r.units || "gb";
  const [, unit] = unitOf(units);
  const per = e.parallelism.gpus > 1 ? "per GPU" : "on the GPU";
  const lines = [["section", "item", "value", "unit", "bytes"]];
  lines.push(["model", "Model", e.model.name, "", ""], ["model", "Source", e.model.source, "", ""]);
  lines.push(["model", "Parameters", e.parameters.total, "parameters", ""], ["model", "Trainable parameters", e.parameters.trainable, "parameters", ""]);
  for (const [label, value] of settingRows(r)) lines.push(["setting", label, value, "", ""]);
  for (const [name, value, bytes] of pieceRows(e, units)) lines.push(["memory " + per, name, value, unit, bytes]);
  lines.push(["verdict", "Verdict", verdictWords(e), "", ""]);
  lines.push(["command", "Command line", commandLine(r), "", ""]);
  return lines.map((l) => l.map(csvField).join(",")).join("\n") + "\n";
}

function mdCell(text) { return String(text).replace(/\|/g, "\\|"); }

function markdown() {
  const { e, r } = last;
  const units = r.units || "gb";
  const [, unit] = unitOf(units);
  const per = e.parallelism.gpus > 1 ? "per GPU" : "on the GPU";
  const out = [`# trainmem estimate: ${mdCell(e.model.name)}`, ""];
  out.push(`**Verdict: ${verdictWords(e)}.** Peak ${size(e.memory.peak, units)} ${per}` + (e.capacity ? ` against ${size(e.capacity.bytes, units)} (${mdCell(e.capacity.label)}).` : "."), "");
  out.push(`Model: ${mdCell(e.model.name)} (${mdCell(e.model.source)}), ${grouped(e.parameters.total)} parameters, ${grouped(e.parameters.trainable)} trainable.`, "");
  out.push("| setting | value |", "| --- | --- |");
  for (const [label, value] of settingRows(r)) out.push(`| ${mdCell(label)} | ${mdCell(value)} |`);
  out.push("", `| piece | memory ${per} (${unit}) | bytes |`, "| --- | ---: | ---: |");
  for (const [name, value, bytes] of pieceRows(e, units)) out.push(`| ${name} | ${value} | ${bytes} |`);
  out.push("", "Units: " + (units === "gib" ? "GiB = 2^30 bytes" : "GB = 10^9 bytes") + ".", "", "```", commandLine(r), "```");
  return out.join("\n") + "\n";
}

async function copy(text, what) {
  try { await navigator.clipboard.writeText(text); say(what + " copied."); }
  catch { say("Copy it from here: " + text); }
}
