// The settings form: built from GROUPS, read into a request, written to and
// restored from the link, spelled as the equivalent command line.

function buildGroups() {
  for (const [title, specs] of GROUPS) {
    const set = element("fieldset");
    set.append(element("legend", {}, title));
    const row = element("div", { class: "row" });
    for (const s of specs) {
      const field = element("div", { class: "field" + (s.wide || s.kind === "text" ? " wide" : "") + (s.kind === "check" ? " check wide" : ""), id: "field-" + s.key });
      let input;
      if (s.kind === "select") {
        input = element("select", { id: s.key });
        for (const [value, text] of s.options) input.append(new Option(text, value));
      } else if (s.kind === "check") {
        input = element("input", { type: "checkbox", id: s.key });
      } else {
        input = element("input", { type: s.kind === "number" ? "number" : "text", id: s.key, spellcheck: "false" });
        if (s.kind === "number") { input.min = "1"; input.step = "1"; input.inputMode = "numeric"; }
      }
      const label = element("label", { for: s.key }, s.kind === "check" ? "" : s.label);
      if (s.kind === "check") { label.append(input, document.createTextNode(s.label)); field.append(label); }
      else field.append(label, input);
      if (s.hint) { const h = element("div", { class: "hint", id: s.key + "-hint" }, s.hint); input.setAttribute("aria-describedby", h.id); field.append(h); }
      row.append(field);
    }
    set.append(row);
    $("groups").append(set);
  }
}

function setValue(key, value) {
  const input = $(key);
  if (!input) return;
  if (input.type === "checkbox") input.checked = value === true || value === "true";
  else {
    if (input.tagName === "SELECT" && ![...input.options].some((o) => o.value === String(value))) input.append(new Option(String(value), String(value)));
    input.value = value;
  }
}

function getValue(key) {
  const input = $(key);
  return input.type === "checkbox" ? input.checked : input.value.trim();
}

// The request of the controls on screen.
function request() {
  const values = {};
  for (const s of SPECS) values[s.key] = getValue(s.key);
  return requestOf({ source, model: $("model").value, params: $("params").value, config: $("config").value, values });
}

function showSource() {
  for (const name of ["preset", "config", "params"]) {
    $("when-" + name).classList.toggle("hidden", name !== source);
    $("source-" + name).setAttribute("aria-pressed", String(name === source));
  }
  $("field-capacity").classList.toggle("hidden", getValue("device") !== "custom");
  for (const s of SPECS.filter((s) => s.needs)) $(s.key).disabled = getValue(s.needs) === "";
  if (optimizers.length) describeOptimizer();
  if (precisions.length) describePrecision();
  if (devices.length) describeDevice();
}

// The link: every setting as `#key=value&...` (a pasted config.json stays out).
// Pinned setups ride along as `pin=<their own settings, encoded>`.
// A control emptied on purpose (no micro-batch: no activations) is written
// as `key=`, so that a key the link leaves out means the page's default.
function linkState(r) {
  const p = new URLSearchParams();
  if (source === "config") p.set("source", "config");
  for (const [k, v] of Object.entries(r)) if (k !== "config") p.set(k, String(v));
  for (const s of SPECS) if (s.kind !== "check" && s.value !== "" && getValue(s.key) === "") p.set(s.key, "");
  for (const pin of pins) p.append("pin", pinLink(pin.r));
  return "#" + p.toString();
}

// The link's settings on the controls (`linkSettings`: every control it
// leaves out is put back to its default, whatever the page showed before);
// a link with no setting of the page (`#top`) changes nothing.
function restore() {
  const settings = linkSettings(location.hash);
  if (!settings) return;
  source = settings.source;
  $("model").value = settings.model;
  $("params").value = settings.params;
  for (const s of SPECS) setValue(s.key, settings.values[s.key]);
}

function quote(text) { return /^[A-Za-z0-9._:+,=@%-]+$/.test(text) ? text : "'" + text.replace(/'/g, "'\\''") + "'"; }

function commandLine(r) {
  const parts = ["trainmem", "estimate"];
  for (const [k, v] of Object.entries(r)) {
    if (k === "config") { parts.push("--model", "config.json"); continue; }
    parts.push("--" + k);
    if (v !== true) parts.push(quote(String(v)));
  }
  return parts.join(" ");
}

// A select's options replaced (`[text, value, title]`: the title is the
// choice's explanation, shown on hover), its value kept.
function fill(select, options) {
  const value = select.value;
  select.textContent = "";
  for (const [text, v, title] of options) {
    const option = new Option(text, v);
    if (title) option.title = title;
    select.append(option);
  }
  setValue(select.id, value);
}

async function loadCatalogues() {
  try {
    const [options, list] = await Promise.all([fetch("/api/options").then((r) => r.json()), fetch("/api/presets").then((r) => r.json())]);
    presets = list;
    // The name in the menu (it fits a phone), its title under it.
    optimizers = options.optimizers;
    fill($("optimizer"), options.optimizers.map((o) => [o.name, o.name, `${o.title}: ${o.summary}`]));
    describeOptimizer();
    precisions = options.precisions;
    fill($("precision"), options.precisions.map((p) => [p.name, p.name, p.summary]));
    describePrecision();
    devices = options.devices;
    // The name and GB in the menu (it fits a phone), both units under it.
    fill($("device"), [["custom capacity", "custom"]].concat(devices.map((d) => [`${d.name} · ${(d.bytes / 1e9).toFixed(2)} GB`, d.name])));
    describeDevice();
  } catch (e) {
    showError("error: the catalogues did not load: " + e.message);
  }
}

// The one line under a control that explains its choice, made on first use.
function hintOf(key) {
  let hint = $(key + "-hint");
  if (!hint) {
    hint = element("div", { class: "hint", id: key + "-hint" });
    $(key).setAttribute("aria-describedby", hint.id);
    $("field-" + key).append(hint);
  }
  return hint;
}

// The optimizer's name in prose and what it keeps (`trainmem optimizers`).
function describeOptimizer() {
  const o = optimizers.find((o) => o.name === getValue("optimizer"));
  hintOf("optimizer").textContent = o ? `${o.title}: ${o.summary}` : "";
}

// What the precision recipe keeps in which dtype (`trainmem precisions`).
function describePrecision() {
  const p = precisions.find((p) => p.name === getValue("precision"));
  hintOf("precision").textContent = p ? p.summary : "";
}

// Errors on their field, in the page's words.

// A control's label without its parenthesis: "Sequence length".
function shortLabel(key) { return LABELS[key].replace(/ \(.*\)$/, ""); }

// The control a message is about: the one it names first (`missing
// --seq-len: activations need --seq-len S with --micro-batch` is about the
// sequence length), the longest name where two start at one place.
function namedKey(message) {
  // A hub id's or a model's own message names config.json only as advice.
  if (/^(error: )?(hub id|invalid model|unknown model)\b/.test(message)) return "model";
  let best = null, at = Infinity;
  // "model" and "config" are words of many messages: a flag named wins.
  const words = ["model", "config", "params"];
  for (const k of Object.keys(LABELS).filter((k) => !words.includes(k)).concat(words)) {
    if (best && words.includes(k)) break;
    const match = new RegExp("(--|`|invalid |\\b)" + k.replace(/[-+]/g, "\\$&") + "(`|\\b)").exec(message);
    if (match && (match.index < at || (match.index === at && k.length > best.length))) { best = k; at = match.index; }
  }
  return best;
}

// `--seq-len S` becomes "Sequence length": the page has no flags.
function inPageWords(message) {
  let text = message.replace(/^error: /, "");
  const keys = Object.keys(LABELS).filter((k) => !["model", "config", "params"].includes(k)).sort((a, b) => b.length - a.length);
  for (const k of keys) {
    text = text.replace(new RegExp("`?--" + k.replace(/[-+]/g, "\\$&") + "`?(?: [A-Z]\\b)?(?![\\w-])", "g"), "“" + shortLabel(k) + "”");
  }
  return text;
}

function showError(message) {
  for (const e of document.querySelectorAll("[aria-invalid]")) e.removeAttribute("aria-invalid");
  for (const e of document.querySelectorAll(".field-error")) e.remove();
  const box = $("error");
  if (!message) { box.classList.add("hidden"); box.textContent = ""; return; }
  const key = namedKey(message);
  const plain = inPageWords(message);
  box.textContent = key ? LABELS[key] + ": " + plain : plain;
  box.dataset.field = key || "";
  const input = key && $(key);
  if (input) {
    input.setAttribute("aria-invalid", "true");
    // The same words under the control, where the eye is.
    const near = element("div", { class: "field-error", id: "error-" + key }, plain);
    (input.closest(".field") || input.parentElement).append(near);
    input.setAttribute("aria-errormessage", near.id);
  }
  box.classList.remove("hidden");
}

// The answer shown is not for the settings on screen.
function markStale(on) {
  const stale = on && !!last;
  $("result").classList.toggle("stale", stale);
  $("stale").classList.toggle("hidden", !stale);
  $("summary-stale").classList.toggle("hidden", !stale);
}

// The phone's pinned summary: the verdict the answer shows.
function summarize() {
  $("summary-verdict").textContent = $("verdict").textContent;
  $("summary-verdict").className = $("verdict").className;
  $("summary").classList.toggle("hidden", !last);
}

function describeDevice() {
  const d = devices.find((d) => d.name === getValue("device"));
  hintOf("device").textContent = d ? `${d.product || d.name}: ${(d.bytes / 2 ** 30).toFixed(2)} GiB = ${(d.bytes / 1e9).toFixed(2)} GB` : "";
}
