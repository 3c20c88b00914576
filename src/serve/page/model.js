// The model box: a preset searched by name (a short list of the matches,
// never the whole catalogue), a hub id left to the server, a config.json
// pasted or opened, and what the engine says it had to assume about it.

// At most this many matches are listed under the model box.
const MATCHES_SHOWN = 8;

// `owner/name`, as the hub spells a repository: left to the server.
const HUB_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;

// The presets (`GET /api/presets`): name, hub id, model_type, parameters.
let presets = null;

// The option of the list the keyboard is on.
let activeMatch = -1;

function presetNamed(text) {
  const wanted = text.trim().toLowerCase();
  return (presets || []).find((p) => p.name.toLowerCase() === wanted || (p.hub_id || "").toLowerCase() === wanted) || null;
}

// The presets whose name or hub id holds every word typed, best first:
// those starting with the text, then the smaller models.
function matches(text) {
  const words = text.trim().toLowerCase().split(/[\s/]+/).filter(Boolean);
  if (!presets || !words.length) return [];
  const found = presets.filter((p) => words.every((w) => (p.name + " " + (p.hub_id || "")).toLowerCase().includes(w)));
  const first = words[0];
  return found.sort((a, b) => (b.name.startsWith(first) - a.name.startsWith(first)) || a.parameters - b.parameters);
}

function billions(parameters) { return (parameters / 1e9).toFixed(parameters < 1e9 ? 2 : 1) + "B"; }

function showMatches() {
  const input = $("model"), list = $("model-list");
  const text = input.value.trim();
  const exact = presetNamed(text);
  const found = exact || HUB_ID.test(text) ? [] : matches(text);
  list.textContent = "";
  activeMatch = -1;
  input.removeAttribute("aria-activedescendant");
  for (const [i, p] of found.slice(0, MATCHES_SHOWN).entries()) {
    const li = element("li", { role: "option", id: "match-" + i, "aria-selected": "false", "data-name": p.name });
    li.append(element("b", {}, p.name), document.createTextNode(` ${billions(p.parameters)} · ${p.hub_id || p.model_type || ""}`));
    li.addEventListener("mousedown", (event) => { event.preventDefault(); pick(p.name); });
    list.append(li);
  }
  if (found.length > MATCHES_SHOWN) list.append(element("li", { class: "more", "aria-disabled": "true" }, `and ${found.length - MATCHES_SHOWN} more: type more of the name`));
  const open = document.activeElement === input && found.length > 0;
  list.classList.toggle("hidden", !open);
  input.setAttribute("aria-expanded", String(open));
}

function pick(name) {
  $("model").value = name;
  $("model-list").classList.add("hidden");
  $("model").setAttribute("aria-expanded", "false");
  schedule();
}

function moveMatch(step) {
  const options = [...$("model-list").querySelectorAll("[role=option]")];
  if (!options.length) return;
  activeMatch = (activeMatch + step + options.length) % options.length;
  options.forEach((o, i) => o.setAttribute("aria-selected", String(i === activeMatch)));
  $("model").setAttribute("aria-activedescendant", options[activeMatch].id);
}

// Why the request is not sent yet, in the page's words, or null: a model
// box that names no preset and no hub id is half typed, not an error.
function heldBack(r) {
  if (source === "config" && r.config.trim() === "") {
    return { key: "config", message: "paste a config.json or open the file to see its answer" };
  }
  if (source !== "preset" || !presets) return null;
  const text = r.model;
  if (text === "") return { key: "model", message: "type a preset name (such as llama-3.1-8b) or a hub id (owner/name)" };
  if (presetNamed(text) || HUB_ID.test(text)) return null;
  const found = matches(text);
  return {
    key: "model",
    message: found.length
      ? `\`${text}\` is not a preset yet: ${found.length === 1 ? "1 preset matches" : found.length + " presets match"}; pick one from the list, or type a hub id (owner/name)`
      : `no preset matches \`${text}\`; try part of a name (llama, qwen, 70b) or a hub id (owner/name)`,
  };
}

// The notes under the model box (what is awaited, what was assumed).
function clearNotes() {
  for (const id of ["model-note", "config-note"]) { $(id).classList.add("hidden"); $(id).textContent = ""; }
}

// The note under the box that a held-back request names.
function showHeld(held) {
  clearNotes();
  if (!held) return;
  const note = $(held.key === "config" ? "config-note" : "model-note");
  note.textContent = held.message;
  note.classList.remove("hidden");
}

// After an answer: what the engine took as defaults for keys the
// config.json lacks (`model.defaulted_keys`), said beside the box.
function modelAnswered(e) {
  const note = $(source === "config" ? "config-note" : "model-note");
  clearNotes();
  const defaulted = (e.model && e.model.defaulted_keys) || [];
  // A preset is a published file, whole; a pasted or fetched one may not be.
  // (The answer says so itself: the first one comes before the presets' list.)
  const preset = source === "preset" && (/^preset /.test((e.model && e.model.source) || "") || presetNamed($("model").value));
  if (source === "params" || preset || !defaulted.length) return;
  note.append(element("b", {}, `This config.json lacks ${defaulted.length === 1 ? "1 key" : defaulted.length + " keys"}; the engine took ${e.model.model_type || "its config class"}'s defaults: `));
  note.append(document.createTextNode(defaulted.map((k) => `${k.key} = ${k.default === "none" ? "none (derived from the other keys)" : k.default}`).join(", ") + `. The model priced has ${grouped(e.parameters.total)} parameters; if that is not the model you meant, paste the whole file.`));
  note.classList.remove("hidden");
}

// A link made while a config.json was pasted cannot carry the file.
function explainMissingConfig() {
  const missing = source === "config" && $("config").value.trim() === "";
  $("notice").classList.toggle("hidden", !missing);
  $("notice").textContent = missing ? "This link was made from a pasted config.json, which a link does not carry (the file stays on the machine that pasted it). Paste it or open the file in the model box (Paste config.json) to see the answer; every other setting of the link is already set." : "";
}

function startModelBox() {
  const input = $("model");
  input.addEventListener("input", showMatches);
  input.addEventListener("focus", showMatches);
  input.addEventListener("blur", () => { $("model-list").classList.add("hidden"); input.setAttribute("aria-expanded", "false"); });
  input.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") { event.preventDefault(); moveMatch(event.key === "ArrowDown" ? 1 : -1); }
    else if (event.key === "Enter" && activeMatch >= 0) { event.preventDefault(); pick($("model-list").querySelectorAll("[role=option]")[activeMatch].dataset.name); }
    else if (event.key === "Escape") { $("model-list").classList.add("hidden"); input.setAttribute("aria-expanded", "false"); }
  });
}
