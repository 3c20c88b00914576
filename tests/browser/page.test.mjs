// The page of `trainmem serve` in a real browser (Debian's Chromium, driven
// by playwright-core), checked against the command line: the verdict and
// the drawn peak are the CLI's, the link restores the page, a phone-width
// page does not scroll sideways, a pasted config.json takes LoRA, and an
// error names its field and clears the stale answer.
//
// Run: cd tests/browser && npm ci && npm test   (needs /usr/bin/chromium)
// Screenshots at both widths go to target/browser/.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { serve, cli, open, answer, root, shots, url, trainmem } from "./harness.mjs";

serve();

test("the verdict and the drawn peak are the CLI's, for every control group", async () => {
  // The case: QLoRA on a 24 GB card at 2700 tokens.
  const hash = "#model=llama-3.1-8b&micro-batch=1&seq-len=2700&precision=mixed-bf16&optimizer=adamw&device=rtx-4090-24gb&gpus=1&offload=none&tp=1&pp=1&lora-rank=16&lora-targets=all-linear&quantize=nf4&recompute=none&attention=sdpa&loss=standard&units=gb";
  const page = await open(1400, 1000, hash);
  // The page's own clock, from navigation start to the first answer drawn.
  const firstAnswer = Number(await page.getAttribute("body", "data-first-answer-ms"));
  // Printed, not compared with a constant: this is a debug build on
  // whatever machine runs the tests (1,017 ms was seen under load on 2
  // cores); the time is a figure for the book, the answer below is the test.
  console.log(`# first answer ${firstAnswer} ms after navigation`);
  assert.ok(firstAnswer > 0, `the page records its first answer (${firstAnswer})`);
  let got = await answer(page);
  let want = cli(["--model", "llama-3.1-8b", "--micro-batch", "1", "--seq-len", "2700", "--precision", "mixed-bf16", "--optimizer", "adamw", "--device", "rtx-4090-24gb", "--lora-rank", "16", "--quantize", "nf4"]);
  assert.equal(Number(got.peak), want.memory.peak);
  assert.equal(Number(got.drawn), want.memory.peak, "the bar draws the peak that decides");
  assert.equal(got.fits, String(want.fits));
  assert.match(got.verdict, want.fits ? /^Fits/ : /^Does not fit/);
  assert.match(await page.textContent("#peakline"), /rtx-4090-24gb \(25\.76 GB = 23\.99 GiB\)/);
  // What would make it fit: `trainmem techniques`' steps, one click away.
  await page.waitForSelector("#fit li");
  await page.screenshot({ path: path.join(shots, "page-1400.png"), fullPage: false });
  const ladder = JSON.parse(execFileSync(trainmem, ["techniques", "--model", "llama-3.1-8b", "--micro-batch", "1", "--seq-len", "2700", "--precision", "mixed-bf16", "--optimizer", "adamw", "--device", "rtx-4090-24gb", "--lora-rank", "16", "--quantize", "nf4", "--format", "json"], { encoding: "utf8" }));
  const offered = await page.$$eval("#fit li", (items) => items.map((li) => Number(li.dataset.peak)));
  assert.deepEqual(offered, ladder.rungs.slice(1).map((rung) => rung.peak));
  await page.click("#pin");
  await page.locator("#fit li button").first().click();
  got = await answer(page);
  assert.equal(Number(got.peak), offered[0], "applying a step gives the peak it promised");
  // Compare: the pinned run beside this one, with the difference.
  const difference = await page.getAttribute("#compare tr[data-difference]", "data-difference");
  assert.equal(Number(difference), offered[0] - want.memory.peak);
  await page.click("#unpin");

  // One control of each group, changed from the page's own widgets.
  await page.fill("#seq-len", "1024");                         // training
  await page.selectOption("#optimizer", "adamw-8bit");          // precision and optimizer
  await page.selectOption("#device", "a100-40gb");              // hardware
  await page.fill("#gpus", "4");
  await page.selectOption("#zero", "3");
  await page.fill("#lora-rank", "8");                           // fine-tuning
  await page.selectOption("#recompute", "full");                // memory techniques
  await page.selectOption("#units", "gib");                     // report
  got = await answer(page);
  want = cli(["--model", "llama-3.1-8b", "--micro-batch", "1", "--seq-len", "1024", "--precision", "mixed-bf16", "--optimizer", "adamw-8bit", "--device", "a100-40gb", "--gpus", "4", "--zero", "3", "--lora-rank", "8", "--quantize", "nf4", "--recompute", "full", "--units", "gib"]);
  assert.equal(Number(got.peak), want.memory.peak);
  assert.equal(Number(got.drawn), want.memory.peak);
  assert.equal(got.fits, String(want.fits));
  assert.match(got.verdict, /per GPU/);
  assert.match(got.verdict, /GiB/);
  assert.match(await page.textContent("#command"), /^trainmem estimate --model llama-3\.1-8b .*--zero 3 .*--recompute full/);

  // Offloading shows host memory.
  await page.selectOption("#offload", "optimizer");
  got = await answer(page);
  assert.equal(got.error, null);
  assert.equal(await page.isVisible("#host"), true, "host memory is shown when offloading");
  await page.close();
});

test("the link restores the page", async () => {
  const page = await open(1200, 900);
  await page.fill("#model", "qwen2.5-0.5b");
  await page.fill("#micro-batch", "2");
  await page.fill("#seq-len", "512");
  await page.selectOption("#precision", "bf16");
  await page.selectOption("#fsdp", "full-shard");
  await page.fill("#gpus", "8");
  await page.check("#offload-activations");
  const first = await answer(page);
  const link = page.url();
  assert.match(link, /#model=qwen2\.5-0\.5b&micro-batch=2&seq-len=512&.*fsdp=full-shard/);
  const again = await open(1200, 900, link.slice(link.indexOf("#")));
  const second = await answer(again);
  assert.equal(second.peak, first.peak);
  assert.equal(await again.inputValue("#fsdp"), "full-shard");
  assert.equal(await again.isChecked("#offload-activations"), true);
  assert.equal(again.url(), link, "the restored page writes the same link");
  await page.close();
  await again.close();
});

test("a pasted config.json takes LoRA", async () => {
  const page = await open(1200, 900);
  await page.click("#source-config");
  const empty = await answer(page);
  assert.equal(empty.error, null, "no error before anything is pasted");
  const config = readFileSync(path.join(root, "presets", "llama-3.2-1b.json"), "utf8");
  await page.fill("#config", config);
  await page.fill("#lora-rank", "16");
  await page.fill("#micro-batch", "2");
  await page.fill("#seq-len", "1024");
  const got = await answer(page);
  const want = cli(["--model", "llama-3.2-1b", "--micro-batch", "2", "--seq-len", "1024", "--precision", "mixed-bf16", "--optimizer", "adamw", "--device", "h100-80gb", "--lora-rank", "16"]);
  assert.equal(got.error, null);
  assert.equal(Number(got.peak), want.memory.peak);
  assert.equal(got.fits, String(want.fits));
  await page.close();
});

test("an error names the field in plain words and keeps the last answer, marked stale", async () => {
  const page = await open(1200, 900);
  const good = await answer(page);
  assert.equal(good.hidden, false);
  await page.fill("#micro-batch", "0");
  const got = await answer(page);
  assert.equal(got.hidden, false, "the last good answer stays");
  assert.equal(got.stale, true, "marked stale");
  assert.equal(got.peak, good.peak);
  assert.match(got.error, /^Micro-batch per GPU \(sequences\): /);
  assert.equal(await page.getAttribute("#micro-batch", "aria-invalid"), "true");
  await page.fill("#micro-batch", "1");
  const fixed = await answer(page);
  assert.equal(fixed.error, null);
  assert.equal(fixed.hidden, false);
  assert.equal(fixed.stale, false);
  await page.close();
});

test("at 390 px the answer is on the first screen and nothing scrolls sideways", async () => {
  const page = await open(390, 844);
  await answer(page);
  const layout = await page.evaluate(() => ({
    scroll: document.documentElement.scrollWidth,
    client: document.documentElement.clientWidth,
    // The settings come first on a phone, under the pinned summary of the answer.
    verdictTop: document.getElementById("summary").getBoundingClientRect().top,
  }));
  assert.ok(layout.scroll <= layout.client, `page is ${layout.scroll} px wide in a ${layout.client} px window`);
  assert.ok(layout.verdictTop < 844, `the verdict starts at ${layout.verdictTop} px`);
  await page.screenshot({ path: path.join(shots, "page-390.png"), fullPage: true });
  // Every control is labelled for screen readers and reachable by Tab.
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll("input, select, textarea")]
      .filter((e) => !(e.labels && e.labels.length) && !e.getAttribute("aria-label"))
      .map((e) => e.id));
  assert.deepEqual(unlabelled, []);
  await page.keyboard.press("Tab");
  assert.notEqual(await page.evaluate(() => document.activeElement.tagName), "BODY");
  const icon = await fetch(url + "favicon.ico");
  assert.equal(icon.status, 200);
  await page.close();
});

test("the answer stays in view while editing, and downloads as JSON, CSV and Markdown", async () => {
  const page = await open(1400, 900, "#model=llama-3.1-8b&micro-batch=1&seq-len=2048&precision=mixed-bf16&optimizer=adamw&device=h100-80gb");
  const got = await answer(page);
  const want = cli(["--model", "llama-3.1-8b", "--micro-batch", "1", "--seq-len", "2048", "--precision", "mixed-bf16", "--optimizer", "adamw", "--device", "h100-80gb"]);
  assert.equal(Number(got.peak), want.memory.peak);
  // The last control of the form scrolled into view and changed: the verdict is still on screen.
  const last = page.locator("#form select, #form input").last();
  await last.scrollIntoViewIfNeeded();
  const scrolled = await page.evaluate(() => window.scrollY);
  assert.ok(scrolled > 0, "the form is longer than the screen");
  await page.selectOption("#units", "gib");
  await answer(page);
  const box = await page.locator("#verdict").boundingBox();
  assert.ok(box && box.y >= 0 && box.y + box.height <= 900, `the verdict at ${JSON.stringify(box)} after scrolling ${scrolled} px`);
  const [json] = await Promise.all([page.waitForEvent("download"), page.click("#download-json")]);
  assert.equal(JSON.parse(readFileSync(await json.path(), "utf8")).memory.peak, want.memory.peak, "the JSON download is the answer");
  for (const [button, shape] of [["#download-csv", /^[^\n]+,[^\n]+\n/], ["#download-md", /^# trainmem estimate: .+\n[^]*\| piece \| memory on the GPU \(GiB\) \| bytes \|\n\| --- \| ---: \| ---: \|\n/]]) {
    const [file] = await Promise.all([page.waitForEvent("download"), page.click(button)]);
    assert.match(readFileSync(await file.path(), "utf8"), shape, button);
  }
  await page.close();
});
