// Pinned setups beside the one shown: kept in the link (`pin=...`) and in
// this browser's localStorage, restored on reload, compared in one table
// of the settings that differ and the pieces side by side.

// The most setups pinned at once; pinning another lets the oldest go.
const MAX_PINS = 4;

// Where this browser keeps the pins between visits.
const PINS_KEY = "trainmem.pins";

// The pieces compared, then the peak that decides.
const COMPARED = [["weights", "weights"], ["master_weights", "master weights"], ["gradients", "gradients"], ["optimizer_states", "optimizer states"], ["activations", "activations"], ["peak", "peak of a step"]];

// One pinned setup's settings as a link's query (a pasted config.json stays out).
function pinLink(r) {
  const p = new URLSearchParams();
  if ("config" in r) p.set("source", "config");
  for (const [k, v] of Object.entries(r)) if (k !== "config") p.set(k, String(v));
  return p.toString();
}

// The request a `pin=` entry of the link stands for; only the page's own keys.
function pinFromLink(text) {
  const p = new URLSearchParams(text);
  const r = {};
  if (p.get("source") === "config") r.config = "";
  for (const [k, v] of p) {
    const spec = SPECS.find((s) => s.key === k);
    if (spec) r[k] = spec.kind === "number" ? Number(v) : spec.kind === "check" ? v === "true" : v;
    else if (k === "model" || k === "params") r[k] = v;
  }
  return r;
}

function samePin(a, b) { return pinLink(a) === pinLink(b) && (a.config || "") === (b.config || ""); }

function savePins() {
  try { localStorage.setItem(PINS_KEY, JSON.stringify(pins.map((p) => p.r))); } catch { /* private mode: the link still holds them */ }
  history.replaceState(null, "", linkState(request()));
}

// Each pin's answer, asked again: the link and the store hold settings only.
async function price(r) {
  if ("config" in r && !r.config) return { r, e: null, problem: "a pasted config.json, which a link does not carry" };
  try {
    const response = await fetch("/api/estimate", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(r) });
    const body = await response.json();
    return response.ok ? { r, e: body } : { r, e: null, problem: inPageWords(body.error || String(response.status)) };
  } catch (error) {
    return { r, e: null, problem: error.message };
  }
}

// Pinned setups' settings, their answers not asked yet.
function unpriced(requests) { return requests.slice(-MAX_PINS).map((r) => ({ r, e: null, problem: "being priced" })); }

// The pins the link holds (`pin=` entries).
function linkPins() { return new URLSearchParams(location.hash.slice(1)).getAll("pin").map(pinFromLink); }

// The pins this browser kept (its first read of localStorage opens the
// store: milliseconds the page's first estimate does not wait for).
function storedPins() {
  try { return JSON.parse(localStorage.getItem(PINS_KEY) || "[]").filter((r) => r && typeof r === "object"); } catch { return []; }
}

// The pins of the link if it has any, else those this browser kept.
function restorePinSettings() {
  const listed = linkPins();
  pins = unpriced(listed.length ? listed : storedPins());
}

// Each pin's answer asked.
async function pricePins() {
  pins = await Promise.all(pins.map((p) => price(p.r)));
  savePins();
  drawCompare();
}

async function restorePins() {
  restorePinSettings();
  await pricePins();
}

function pinNow() {
  if (!last) return;
  if (pins.some((p) => samePin(p.r, last.r))) { say("This setup is already pinned."); return; }
  pins.push({ r: last.r, e: last.e });
  const dropped = pins.length > MAX_PINS ? pins.shift() : null;
  savePins();
  drawCompare();
  say(`Pinned (${pins.length} of ${MAX_PINS}${dropped ? ", the oldest let go" : ""}): change a setting to compare; the pins are in the link.`);
}

function unpin(index) {
  if (index === undefined) pins = []; else pins.splice(index, 1);
  savePins();
  drawCompare();
}

// A setting's value as the page shows it; "—" when not given.
function settingText(r, key, e) {
  if (key === "model") return "config" in r ? "pasted config.json" : r.params ? r.params + " parameters" : (r.model || "—");
  const value = r[key];
  if (value === undefined || value === "" || value === false) return key === "units" ? "gb" : "—";
  return value === true ? "yes" : String(value);
}

function drawCompare() {
  const node = $("compare");
  const shown = pins.length > 0 && !!last;
  node.classList.toggle("hidden", !shown);
  $("unpin").classList.toggle("hidden", !pins.length);
  if (!shown) return;
  const units = last.r.units || "gb";
  node.tHead.textContent = ""; node.tBodies[0].textContent = "";
  const head = element("tr");
  head.append(element("th", { scope: "col" }, "setting or piece"));
  pins.forEach((pin, i) => {
    const th = element("th", { scope: "col" }, `pin ${i + 1} `);
    const remove = element("button", { type: "button", class: "unpin-one", "aria-label": `Unpin pin ${i + 1}` }, "×");
    remove.addEventListener("click", () => unpin(i));
    th.append(remove);
    head.append(th);
  });
  head.append(element("th", { scope: "col" }, "now"));
  node.tHead.append(head);
  const all = pins.map((p) => p.r).concat([last.r]);
  // The settings that differ between any two of them.
  const keys = ["model"].concat(SPECS.map((s) => s.key));
  for (const key of keys) {
    const values = all.map((r) => settingText(r, key));
    if (values.every((v) => v === values[0])) continue;
    const tr = element("tr", { class: "setting", "data-key": key });
    tr.append(element("th", { scope: "row" }, key === "model" ? "Model" : LABELS[key]));
    for (const v of values) tr.append(element("td", {}, v));
    node.tBodies[0].append(tr);
  }
  for (const [k, name] of COMPARED) {
    const tr = element("tr", { class: "piece" });
    tr.append(element("th", { scope: "row" }, name));
    for (const pin of pins) tr.append(element("td", {}, pin.e ? size(pin.e.memory[k], units) : "—"));
    tr.append(element("td", {}, size(last.e.memory[k], units)));
    // The peak now minus the latest pin's, for tools and tests.
    const latest = pins[pins.length - 1];
    if (k === "peak" && latest.e) tr.dataset.difference = String(last.e.memory.peak - latest.e.memory.peak);
    node.tBodies[0].append(tr);
  }
  const verdicts = element("tr", { class: "piece" });
  verdicts.append(element("th", { scope: "row" }, "verdict"));
  for (const e of pins.map((p) => p.e).concat([last.e])) verdicts.append(element("td", {}, !e ? "—" : e.fits === null || !e.capacity ? "no capacity" : e.fits ? "fits" : "does not fit"));
  node.tBodies[0].append(verdicts);
  const change = element("tr", { class: "piece" });
  change.append(element("th", { scope: "row" }, "peak now minus the pin's"));
  for (const pin of pins) {
    const d = pin.e ? last.e.memory.peak - pin.e.memory.peak : null;
    change.append(element("td", {}, d === null ? pin.problem || "—" : (d >= 0 ? "+" : "−") + size(Math.abs(d), units)));
  }
  change.append(element("td", {}, ""));
  node.tBodies[0].append(change);
}
