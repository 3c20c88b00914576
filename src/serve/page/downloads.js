// Downloads (JSON, CSV, Markdown) and copying to the clipboard.

function download(name, type, text) {
  const a = element("a", { href: URL.createObjectURL(new Blob([text], { type })), download: name });
  document.body.append(a); a.click(); a.remove();
}

function rows() {
  const m = last.e.memory;
  return [["piece", "bytes"], ["weights", m.weights], ["master_weights", m.master_weights], ["gradients", m.gradients], ["optimizer_states", m.optimizer_states], ["activations", m.activations], ["total", m.total], ["peak", m.peak], ["capacity", last.e.capacity ? last.e.capacity.bytes : ""]];
}

async function copy(text, what) {
  try { await navigator.clipboard.writeText(text); $("status").textContent = what + " copied."; }
  catch { $("status").textContent = "Copy it from here: " + text; }
}
