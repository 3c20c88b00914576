// The page's start: controls built, the link restored, the first answer (asked by first.js) taken and drawn.

async function start() {
  // Watched from the start: the paint of the first answer's verdict.
  const painted = paintOf("first-answer");
  $("model").defaultValue = DEFAULT_MODEL;
  $("params").defaultValue = DEFAULT_PARAMS;
  buildGroups();
  // The settings (the page's defaults, then the link's) first: the first
  // answer does not wait for the menus' catalogues.
  for (const s of SPECS) setValue(s.key, s.value);
  restore();
  // The link's pins now (the first answer's link keeps them); this
  // browser's own only once the first estimate is asked.
  pins = unpriced(linkPins());
  showSource();
  // The first estimate was asked while the page was parsed (first.js);
  // this update takes its answer, and asks again only if the controls
  // came out different. Nothing else is asked before it: the server's
  // workers are few, and the catalogues (the presets' listing is built on
  // its first call) and the pins' answers would queue before it.
  const first = update();
  // The page laid out now, while the first estimate is in flight, so that
  // drawing the answer lays out only what the answer changes.
  void document.body.offsetHeight;
  if (!pins.length) pins = unpriced(storedPins());
  for (const b of document.querySelectorAll("[data-source]")) b.addEventListener("click", () => { source = b.dataset.source; schedule(); });
  // A config.json file is read here, in the browser, and sent as `config`.
  $("config-file").addEventListener("change", async () => {
    const file = $("config-file").files[0];
    if (file) { $("config").value = await file.text(); schedule(); }
  });
  $("form").addEventListener("input", schedule);
  $("form").addEventListener("change", schedule);
  $("copy-command").addEventListener("click", () => last && copy(commandLine(last.r), "Command"));
  $("copy-link").addEventListener("click", () => copy(location.href, "Link"));
  $("download-json").addEventListener("click", () => last && download("trainmem.json", "application/json", JSON.stringify(last.e, null, 2) + "\n"));
  $("download-csv").addEventListener("click", () => last && download("trainmem.csv", "text/csv", csv()));
  $("download-md").addEventListener("click", () => last && download("trainmem.md", "text/markdown", markdown()));
  $("pin").addEventListener("click", pinNow);
  $("unpin").addEventListener("click", () => unpin());
  startModelBox();
  $("to-answer").addEventListener("click", () => $("answer").scrollIntoView({ block: "start" }));
  window.addEventListener("hashchange", () => { restore(); schedule(); restorePins(); });
  // Settles once the answer is written and its charts drawn (in the frame
  // after the one that paints its figures and table).
  await first;
  const frame = performance.now();
  // Milliseconds from navigation to the first answer on screen: the paint
  // of its verdict, as the browser reports it (the verdict, the figures
  // beside it and the table of pieces are written in one task, so they are
  // painted in one frame); where the browser does not report paints (or no
  // answer came), the end of the frame after it was written.
  const at = last && painted ? await Promise.race([painted, delay(PAINT_REPORT_MS)]) : null;
  performance.mark("first-answer-painted", { startTime: at || frame });
  document.body.dataset.firstAnswerMs = String(Math.round(at || frame));
  // Then what the first answer did not need: the menus' catalogues and the
  // pinned setups' answers.
  const catalogues = loadCatalogues().then(() => {
    // A model box that names no preset was asked about without the list:
    // now it can say which presets match instead.
    if (heldBack(request())) schedule();
  }).finally(cataloguesSettled);
  await Promise.all([catalogues, pricePins()]);
  document.body.dataset.ready = "1";
}

// How long the page waits for the browser to report the first answer's paint.
const PAINT_REPORT_MS = 1000;

function delay(ms) { return new Promise((resolve) => setTimeout(() => resolve(null), ms)); }

// The time the element marked `elementtiming="<identifier>"` is first
// painted (the Element Timing API); null where the browser lacks it.
function paintOf(identifier) {
  if (!(PerformanceObserver.supportedEntryTypes || []).includes("element")) return null;
  return new Promise((resolve) => {
    const observer = new PerformanceObserver((list) => {
      const entry = list.getEntries().find((e) => e.identifier === identifier);
      if (entry) { observer.disconnect(); resolve(entry.renderTime || entry.startTime); }
    });
    observer.observe({ type: "element", buffered: true });
  });
}

start();
