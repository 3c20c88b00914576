// The page's start: controls built, the link restored, the first answer asked.

async function start() {
  buildGroups();
  // The settings (the page's defaults, then the link's) first: the first
  // answer does not wait for the menus' catalogues.
  for (const s of SPECS) setValue(s.key, s.value);
  restore();
  showSource();
  const catalogues = loadCatalogues();
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
  const pinned = restorePins();
  await update();
  // Milliseconds from navigation to the first answer on screen.
  document.body.dataset.firstAnswerMs = String(Math.round(performance.now()));
  await Promise.all([catalogues, pinned]);
  document.body.dataset.ready = "1";
}

start();
