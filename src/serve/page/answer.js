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
    const asked = JSON.stringify(r);
    // The first update takes the answer asked while the page was parsed.
    const response = await (takeFirst(asked) || fetch("/api/estimate", { method: "POST", headers: { "content-type": "application/json" }, body: asked }));
    const body = await response.json();
    if (mine !== generation) return;
    // A bad value keeps the last good answer on screen, marked stale.
    if (!response.ok) { markStale(true); showError(body.error || "the server answered " + response.status); }
    else {
      showError(null); markStale(false);
      const charts = show(body, r);
      modelAnswered(body); summarize();
      // Settled (`data-pending` 0) once the charts are drawn too.
      await charts;
    }
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
  for (const id of ["reserved-line", "time-line", "recipe-line"]) $(id).textContent = "";
  $("shard-hint").classList.add("hidden");
  delete result.dataset.peak; delete result.dataset.fits; delete $("bar").dataset.drawnPeak;
  delete result.dataset.reserved; delete result.dataset.stepTime; delete result.dataset.verdict;
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
  verdict.className = fits === null ? "" : fits ? "fits" : e.fits_allocated ? "tight" : "over";
  result.dataset.reserved = String(reserved);
  result.dataset.verdict = fits === null ? "" : fits ? "fits" : e.fits_allocated ? "tight" : "over";
  const gpu = e.parallelism.gpus > 1 ? "per GPU" : "on the GPU";
  verdict.textContent = fits === null ? `Peak ${gpu}: ${size(peak, units)}`
    : fits ? `Fits: peak ${size(peak, units)} ${gpu}, reserved ${size(reserved, units)}, ${size(capacity - reserved, units)} spare`
    : e.fits_allocated ? `Does not fit (tight): peak ${size(peak, units)} ${gpu} fits, but the allocator reserves ${size(reserved, units)}, ${size(reserved - capacity, units)} over`
    : `Does not fit: peak ${size(peak, units)} ${gpu}, ${size(peak - capacity, units)} over`;
  const label = e.capacity ? e.capacity.label.replace(/\(([\d.]+) GB\)/, (m, gb) => `(${gb} GB = ${(e.capacity.bytes / 2 ** 30).toFixed(2)} GiB)`) : "";
  $("peakline").textContent = `${e.model.name}, ${grouped(e.parameters.total)} parameters (${grouped(e.parameters.trainable)} trainable)` +
    (e.capacity ? `; capacity ${label} per GPU` : "; no capacity given") + `; the peak is reached in ${e.timeline ? e.timeline.peak.phase : "the step"}.`;
  result.classList.remove("hidden");
  figures(e, units, capacity);
  table($("pieces"), e, units);
  const offloaded = Boolean(e.host) && (e.parallelism.offload !== "none" || e.host.activations > 0) && e.host.total > 0;
  $("host").classList.toggle("hidden", !offloaded);
  if (offloaded) hostTable($("host-pieces"), e, units);
  const notes = $("notes"); notes.textContent = "";
  for (const n of e.notes.concat(e.activations ? e.activations.notes || [] : [])) notes.append(element("li", {}, n));
  $("command").textContent = commandLine(r);
  drawCompare();
  suggest(e, r);
  planHint(e, r);
  // The charts come in the frame after the figures and the table: drawn
  // now, they would make the page lay the answer out twice (once to read
  // their widths, once to place them) before anything of it is painted.
  return chartsAfterFrame(e, units, capacity);
}

// The figures beside the verdict: what the allocator reserves, the step
// time with its stated uncertainty, and what the precision recipe keeps.
function figures(e, units, capacity) {
  const m = e.memory;
  $("reserved-line").textContent = `Reserved by the allocator: ${size(m.reserved, units)} per GPU (the peak plus the caching allocator's rounding and free blocks, and the CUDA context)` +
    (capacity ? `: ${m.reserved <= capacity ? size(capacity - m.reserved, units) + " left of the capacity" : size(m.reserved - capacity, units) + " more than the capacity"}.` : ".");
  const t = e.time;
  const line = $("time-line");
  if (t && t.step_time_s > 0) {
    const u = t.uncertainty;
    const within = u ? ` (approximate: on ${u.held_out_cases} published runs held out of the fit its mean error is ${Math.round(100 * u.mean_abs_error)}%, ${Math.round(100 * u.within_15_percent)}% of them within 15%)` : " (approximate)";
    line.textContent = `Step time about ${seconds(t.step_time_s)} on ${t.device || "this GPU"}, ${grouped(Math.round(t.tokens_per_s))} tokens/s over the job${within}.`;
    $("result").dataset.stepTime = String(t.step_time_s);
  } else {
    line.textContent = "Step time: not priced for this GPU (give a GPU from the list to price it).";
    delete $("result").dataset.stepTime;
  }
  const p = e.precision;
  $("recipe-line").textContent = p ? `Precision ${p.name}: ${p.summary}.` : "";
}

function seconds(s) { return s >= 10 ? s.toFixed(1) + " s" : s >= 1 ? s.toFixed(2) + " s" : Math.round(s * 1000) + " ms"; }
