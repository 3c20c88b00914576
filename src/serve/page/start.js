// The page's start: controls built, the link restored, the first answer asked.

async function start() {
  buildGroups();
  // The settings (the page's defaults, then the link's) first: the first
  // answer does not wait for the menus' catalogues.
  for (const s of SPECS) setValue(s.key, s.value);
  restore();
  // The link's pins now (the first answer's link keeps them); this
  // browser's own only once the first estimate is asked.
  pins = unpriced(linkPins());
  showSource();
  // The first estimate is asked at once, before any other call: the
  // server's workers are few, and the catalogues (the presets' listing is
  // built on its first call) and the pins' answers would queue before it.
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
  await first;
  // Milliseconds from navigation to the first answer on screen.
  document.body.dataset.firstAnswerMs = String(Math.round(performance.now()));
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

start();
