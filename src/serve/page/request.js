// The request the page sends, from its settings as plain values: one
// function for the controls on screen and for a link read before any
// control is built (the first estimate is asked while the page is parsed).

// A model box's default, and a parameter count's.
const DEFAULT_MODEL = "llama-3.1-8b";
const DEFAULT_PARAMS = "7B";

// The page's own settings: `source` (preset, config or params), the model
// box, the parameter count, the pasted config.json, and each control's
// value by its key (a check box's a boolean, every other one's its text).
function defaultSettings() {
  const values = {};
  for (const s of SPECS) values[s.key] = s.value;
  return { source: "preset", model: DEFAULT_MODEL, params: DEFAULT_PARAMS, config: "", values };
}

// A link's settings over the page's defaults (a hand-written `#model=gpt2`
// is gpt2 with the page's defaults); null for a link that names none of
// the page's settings (`#top`), which changes nothing.
function linkSettings(hash) {
  const p = new URLSearchParams(hash.replace(/^#/, ""));
  if (![...p.keys()].some((k) => LABELS[k] || k === "source")) return null;
  const settings = defaultSettings();
  if (p.has("model")) settings.model = p.get("model");
  if (p.has("params")) { settings.params = p.get("params"); settings.source = "params"; }
  if (p.get("source") === "config") settings.source = "config";
  if (p.has("capacity") && !p.has("device")) settings.values.device = "custom";
  for (const [k, v] of p) {
    const spec = SPECS.find((s) => s.key === k);
    if (!spec) continue;
    // A menu has no empty choice unless it lists one ("none").
    if (v === "" && spec.kind === "select" && !spec.options.some(([value]) => value === "")) continue;
    settings.values[k] = spec.kind === "check" ? v === "true" : v;
  }
  return settings;
}

// The request: only what differs from "not given" is sent.
function requestOf(settings) {
  const value = (key) => {
    const v = settings.values[key];
    return typeof v === "boolean" ? v : String(v).trim();
  };
  const r = {};
  if (settings.source === "preset") r.model = settings.model.trim();
  if (settings.source === "params") r.params = settings.params.trim();
  if (settings.source === "config") r.config = settings.config;
  for (const s of SPECS) {
    const v = value(s.key);
    if (v === "" || v === false) continue;
    if (s.key === "capacity" && value("device") !== "custom") continue;
    if (s.key === "device" && v === "custom") continue;
    if (s.key === "zero" && value("fsdp") !== "") continue;
    if (s.needs && value(s.needs) === "") continue;
    if (s.quiet && v === s.value) continue;
    r[s.key] = s.kind === "number" ? Number(v) : v;
  }
  return r;
}
