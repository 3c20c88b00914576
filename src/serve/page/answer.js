// Asking the engine (`POST /api/estimate`) and showing its answer: the
// verdict, the pieces, the notes, or the error on its field.

function schedule() {
  showSource();
  clearTimeout(timer);
  // An answer is coming: the one shown stays until it arrives.
  document.body.dataset.pending = "1";
  timer = setTimeout(update, DEBOUNCE_MS);
}

async function update() {
  const r = request();
  history.replaceState(null, "", linkState(r));
  explainMissingConfig();
  // A half-typed model or an empty paste box is not asked about: the last
  // answer stays, marked stale, and the box says what it waits for.
  const held = heldBack(r);
  showHeld(held);
  if (held) {
    generation++;
    showError(null);
    markStale(true);
    document.body.dataset.pending = "0";
    return;
  }
  const mine = ++generation;
  document.body.dataset.pending = "1";
  try {
    const response = await fetch("/api/estimate", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(r) });
    const body = await response.json();
    if (mine !== generation) return;
    // A bad value keeps the last good answer on screen, marked stale.
    if (!response.ok) { markStale(true); showError(body.error || "the server answered " + response.status); }
    else { showError(null); markStale(false); show(body, r); modelAnswered(body); summarize(); }
  } catch (e) {
    if (mine === generation) { markStale(true); showError("error: the server did not answer: " + e.message); }
  } finally {
    if (mine === generation) document.body.dataset.pending = "0";
  }
}

function hideResult() {
  last = null;
  fitGeneration++;
  $("fit").textContent = "";
  $("fit-section").classList.add("hidden");
  const result = $("result");
  result.classList.add("hidden");
  for (const id of ["verdict", "peakline", "legend", "notes", "command"]) $(id).textContent = "";
  for (const id of ["bar", "timeline"]) $(id).querySelectorAll(":not(title)").forEach((n) => n.remove());
  delete result.dataset.peak; delete result.dataset.fits; delete $("bar").dataset.drawnPeak;
}

function unitOf(units) { return units === "gib" ? [2 ** 30, "GiB"] : [1e9, "GB"]; }

function size(bytes, units) {
  const [scale, name] = unitOf(units);
  const n = bytes / scale;
  return (n >= 100 ? n.toFixed(1) : n.toFixed(2)).replace(/\.?0+$/, "") + " " + name;
}

function show(e, r) {
  last = { e, r };
  const units = r.units || "gb";
  const peak = e.memory.peak;
  const capacity = e.capacity ? e.capacity.bytes : null;
  const result = $("result");
  result.dataset.peak = String(peak);
  // One verdict, the engine's `fits`: what the allocator reserves (the
  // overhead included) against the capacity; tight when only the
  // allocated peak fits.
  const fits = capacity === null ? null : e.fits;
  const reserved = e.memory.reserved;
  result.dataset.fits = fits === null ? "" : String(fits);
  const verdict = $("verdict");
  verdict.className = fits === null ? "" : fits ? "fits" : "over";
  const gpu = e.parallelism.gpus > 1 ? "per GPU" : "on the GPU";
  verdict.textContent = fits === null ? `Peak ${gpu}: ${size(peak, units)}`
    : fits ? `Fits: peak ${size(peak, units)} ${gpu}, reserved ${size(reserved, units)}, ${size(capacity - reserved, units)} spare`
    : e.fits_allocated ? `Does not fit (tight): peak ${size(peak, units)} ${gpu} fits, but the allocator reserves ${size(reserved, units)}, ${size(reserved - capacity, units)} over`
    : `Does not fit: peak ${size(peak, units)} ${gpu}, ${size(peak - capacity, units)} over`;
  const label = e.capacity ? e.capacity.label.replace(/\(([\d.]+) GB\)/, (m, gb) => `(${gb} GB = ${(e.capacity.bytes / 2 ** 30).toFixed(2)} GiB)`) : "";
  $("peakline").textContent = `${e.model.name}, ${e.parameters.total.toLocaleString("en")} parameters (${e.parameters.trainable.toLocaleString("en")} trainable)` +
    (e.capacity ? `; capacity ${label} per GPU` : "; no capacity given") + `; the peak is reached in ${e.timeline ? e.timeline.peak.phase : "the step"}.`;
  drawBar(e, units, capacity);
  drawTimeline(e, units, capacity);
  table($("pieces"), e.memory, units, e.parallelism.gpus > 1 ? "per GPU" : "bytes");
  const offloaded = e.parallelism.offload !== "none" && e.host && e.host.total > 0;
  $("host").classList.toggle("hidden", !offloaded);
  if (offloaded) table($("host-pieces"), e.host, units, "host");
  const notes = $("notes"); notes.textContent = "";
  for (const n of e.notes.concat(e.activations ? e.activations.notes || [] : [])) notes.append(element("li", {}, n));
  $("command").textContent = commandLine(r);
  result.classList.remove("hidden");
  drawCompare();
  suggest(e, r);
}
