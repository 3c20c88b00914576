// The settings side of the page (issue 27, points 4, 5, 8 and 9), in a real
// browser against the CLI: the model box (a short list of matching presets,
// a hub id resolved by the server through a test hub, a config.json opened
// from a file, the keys a truncated config lacks), a pasted-config link
// that explains itself, three pinned setups restored from the link and from
// localStorage, downloads that carry the model and the settings, the phone's
// pinned verdict and uncut menus, errors on their own field and the last
// good answer kept, marked stale, while a value is invalid.
//
// Run: cd tests/browser && npm ci && npm test   (needs /usr/bin/chromium)
// Screenshots at both sizes go to docs/ (page-1400.png, page-390.png).

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import os from "node:os";
import path from "node:path";
import { serve, cli, open, answer, downloaded, root, url } from "./harness.mjs";

// A test hub speaking the hub's URL layout (the revision API, then
// `resolve/{commit}/config.json`), holding one repository with the
// published Llama 3.2 1B config.json and no weights.
const HUB_ID = "acme/llama-3.2-1b-copy";
const COMMIT = "0e9e39f249a16976918f6564b8830bc894c89659";
const LLAMA_1B = readFileSync(path.join(root, "presets", "llama-3.2-1b.json"), "utf8");
let hub, home;
const hubRequests = [];

function startHub() {
  hub = createServer((request, response) => {
    hubRequests.push(request.url);
    if (request.url.startsWith(`/api/models/${HUB_ID}/revision/`)) {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ id: HUB_ID, sha: COMMIT, gated: false, siblings: [{ rfilename: "config.json" }] }));
    } else if (request.url === `/${HUB_ID}/resolve/${COMMIT}/config.json` || request.url === `/${HUB_ID}/resolve/main/config.json`) {
      response.writeHead(200, { etag: '"0bb6fd4b7f1a5fd4d3b3d2f6e0c6ad7c1fa0f2a1"', "x-repo-commit": COMMIT });
      response.end(LLAMA_1B);
    } else {
      response.writeHead(404, { "x-error-code": "EntryNotFound" });
      response.end('{"error":"not found"}');
    }
  });
  return new Promise((resolve) => hub.listen(0, "127.0.0.1", () => resolve(hub.address().port)));
}

serve({
  before: async () => {
    const port = await startHub();
    home = mkdtempSync(path.join(os.tmpdir(), "trainmem-page-hub-"));
    return {
      env: {
        HF_ENDPOINT: `http://127.0.0.1:${port}`, HF_HOME: home, HF_HUB_DOWNLOAD_TIMEOUT: "5",
        HF_HUB_CACHE: undefined, HUGGINGFACE_HUB_CACHE: undefined, HF_HUB_OFFLINE: undefined, HF_TOKEN: undefined, XDG_CACHE_HOME: undefined,
      },
    };
  },
  after: async () => {
    if (hub) await new Promise((resolve) => hub.close(resolve));
    if (home) rmSync(home, { recursive: true, force: true });
  },
});

const BASE = ["--micro-batch", "1", "--seq-len", "2048", "--precision", "mixed-bf16", "--optimizer", "adamw", "--device", "h100-80gb"];

test("typing 70b lists the few matching presets, not an error with all of them", async () => {
  const page = await open(1400, 1000);
  const before = await answer(page);
  await page.fill("#model", "70b");
  const held = await answer(page);
  const listed = await page.$$eval("#model-list [role=option]", (items) => items.map((li) => li.dataset.name));
  assert.ok(listed.length >= 1 && listed.length <= 8, `a short list: ${listed}`);
  for (const name of listed) assert.match(name, /70b/);
  assert.equal(held.error, null, "a half-typed name is not an error");
  assert.equal(held.hidden, false, "the last answer stays");
  assert.equal(held.stale, true, "and is marked stale");
  assert.equal(held.peak, before.peak);
  assert.match(await page.textContent("#model-note"), /not a preset yet: \d+ presets? match/);
  // No element of the page lists the catalogue.
  const longest = await page.evaluate(() => Math.max(...[...document.querySelectorAll("body *")].filter((e) => e.children.length === 0).map((e) => (e.textContent.match(/llama-/g) || []).length)));
  assert.ok(longest < 8, `no wall of names (${longest} in one element)`);
  // The keyboard picks one: down, Enter.
  await page.press("#model", "ArrowDown");
  await page.press("#model", "Enter");
  const picked = await answer(page);
  assert.equal(await page.inputValue("#model"), listed[0]);
  assert.equal(picked.stale, false);
  assert.equal(Number(picked.peak), cli(["--model", listed[0], ...BASE]).memory.peak);
  await page.close();
});

test("a hub id is resolved by the server through a test hub", async () => {
  const page = await open(1400, 1000);
  await page.fill("#model", HUB_ID);
  const got = await answer(page);
  assert.equal(got.error, null);
  const want = cli(["--model", "llama-3.2-1b", ...BASE]);
  assert.equal(Number(got.peak), want.memory.peak, "the hub's config.json prices as its preset");
  assert.match(await page.textContent("#peakline"), /llama-3\.2-1b-copy/);
  assert.ok(hubRequests.some((r) => r.includes("config.json")), `the server asked the test hub: ${hubRequests}`);
  await page.close();
});

test("a config.json opened from a file, and a truncated one named for the keys it lacks", async () => {
  const page = await open(1400, 1000);
  await page.click("#source-config");
  const dir = mkdtempSync(path.join(os.tmpdir(), "trainmem-upload-"));
  const file = path.join(dir, "config.json");
  writeFileSync(file, LLAMA_1B);
  await page.setInputFiles("#config-file", file);
  let got = await answer(page);
  assert.equal(got.error, null);
  assert.equal(Number(got.peak), cli(["--model", "llama-3.2-1b", ...BASE]).memory.peak);
  assert.equal(await page.isVisible("#config-note"), false, "a whole file lacks no key");
  // Only the hidden size and the layer count: LlamaConfig's defaults fill the rest, said aloud.
  const truncated = path.join(dir, "truncated-config.json");
  writeFileSync(truncated, JSON.stringify({ model_type: "llama", hidden_size: 2048, num_hidden_layers: 16 }));
  await page.setInputFiles("#config-file", truncated);
  got = await answer(page);
  rmSync(dir, { recursive: true, force: true });
  assert.equal(got.error, null);
  const note = await page.textContent("#config-note");
  for (const key of ["vocab_size = 32000", "intermediate_size = 11008", "num_attention_heads = 32", "tie_word_embeddings = false"]) assert.ok(note.includes(key), `${key} in: ${note}`);
  assert.match(note, /lacks \d+ keys/);
  const parameters = (await page.evaluate(() => fetch("/api/estimate", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ config: { model_type: "llama", hidden_size: 2048, num_hidden_layers: 16 } }) }).then((r) => r.json()))).parameters.total;
  assert.ok(note.includes(parameters.toLocaleString("en")), "the note gives the parameters priced");
  await page.close();
});

test("a link to a pasted-config setup explains that the config is not in it", async () => {
  const page = await open(1400, 1000, "#source=config&micro-batch=2&seq-len=1024&lora-rank=16&device=a100-80gb");
  const got = await answer(page);
  assert.equal(got.error, null);
  assert.equal(await page.isVisible("#notice"), true);
  assert.match(await page.textContent("#notice"), /a link does not carry/);
  assert.equal(await page.isVisible("#config"), true, "the paste box is offered");
  assert.equal(await page.inputValue("#lora-rank"), "16", "the other settings are set");
  await page.fill("#config", LLAMA_1B);
  const priced = await answer(page);
  assert.equal(await page.isVisible("#notice"), false);
  assert.equal(Number(priced.peak), cli(["--model", "llama-3.2-1b", "--micro-batch", "2", "--seq-len", "1024", "--lora-rank", "16", "--device", "a100-80gb", "--precision", "mixed-bf16", "--optimizer", "adamw"]).memory.peak);
  await page.close();
});

test("three pinned setups are kept in the link and in localStorage, and compared", async () => {
  const page = await open(1400, 1000);
  const setups = [["qwen2.5-0.5b", "512"], ["qwen2.5-0.5b", "1024"], ["llama-3.2-1b", "1024"]];
  for (const [model, seq] of setups) {
    await page.fill("#model", model);
    await page.fill("#seq-len", seq);
    await answer(page);
    await page.click("#pin");
  }
  await page.fill("#seq-len", "4096");
  await answer(page);
  const link = page.url();
  assert.equal(new URLSearchParams(link.slice(link.indexOf("#") + 1)).getAll("pin").length, 3, link);
  const peaks = setups.map(([model, seq]) => cli(["--model", model, "--micro-batch", "1", "--seq-len", seq, "--precision", "mixed-bf16", "--optimizer", "adamw", "--device", "h100-80gb"]).memory.peak);

  const check = async (restored, how) => {
    await restored.waitForSelector("#compare:not(.hidden)");
    const table = await restored.evaluate(() => ({
      head: [...document.querySelectorAll("#compare thead th")].map((th) => th.textContent.replace("×", "").trim()),
      settings: [...document.querySelectorAll("#compare tr.setting")].map((tr) => [...tr.children].map((c) => c.textContent)),
      peak: [...document.querySelectorAll("#compare tr.piece")].find((tr) => tr.firstChild.textContent === "peak of a step"),
    }));
    assert.deepEqual(table.head, ["setting or piece", "pin 1", "pin 2", "pin 3", "now"], how);
    // Only the settings that differ: the model and the sequence length.
    assert.deepEqual(table.settings, [["Model", "qwen2.5-0.5b", "qwen2.5-0.5b", "llama-3.2-1b", "llama-3.2-1b"], ["Sequence length (tokens)", "512", "1024", "1024", "4096"]], how);
    const cells = await restored.$$eval("#compare tr.piece", (rows) => rows.find((tr) => tr.firstChild.textContent === "peak of a step").dataset.difference);
    const now = Number((await answer(restored)).peak);
    assert.equal(Number(cells), now - peaks[2], `${how}: the peak's difference from the latest pin`);
    const shownPeaks = await restored.$$eval("#compare tr.piece", (rows) => [...rows.find((tr) => tr.firstChild.textContent === "peak of a step").children].slice(1).map((td) => td.textContent));
    const gb = (bytes) => ((bytes / 1e9) >= 100 ? (bytes / 1e9).toFixed(1) : (bytes / 1e9).toFixed(2)).replace(/\.?0+$/, "") + " GB";
    assert.deepEqual(shownPeaks.slice(0, 3), peaks.map(gb), how);
  };
  // From the link, in a fresh browser context (no localStorage).
  const fromLink = await open(1400, 1000, link.slice(link.indexOf("#")));
  await check(fromLink, "from the link");
  await fromLink.screenshot({ path: path.join(root, "target", "browser", "compare-1400.png") });
  await fromLink.close();
  // From this browser's store, on a reload without the pins in the link.
  await page.goto(url + "#model=llama-3.2-1b&micro-batch=1&seq-len=4096&precision=mixed-bf16&optimizer=adamw&device=h100-80gb");
  await page.reload();
  await page.waitForSelector('body[data-ready="1"]');
  await check(page, "from localStorage");
  await page.click("#unpin");
  assert.equal(await page.isVisible("#compare"), false);
  await page.close();
});

test("downloads carry the model, the settings, the units and the verdict, where they can be seen", async () => {
  const page = await open(1400, 1000, "#model=llama-3.1-8b&micro-batch=1&seq-len=2048&precision=mixed-bf16&optimizer=adamw&device=h100-80gb&lora-rank=16&units=gib");
  await answer(page);
  const want = cli(["--model", "llama-3.1-8b", ...BASE, "--lora-rank", "16", "--units", "gib"]);
  // The form scrolled to its end: the toolbar is still on screen.
  await page.locator("#form select, #form input").last().scrollIntoViewIfNeeded();
  for (const id of ["#copy-link", "#download-json", "#download-csv", "#download-md"]) {
    const box = await page.locator(id).boundingBox();
    assert.ok(box && box.y >= 0 && box.y + box.height <= 1000, `${id} at ${JSON.stringify(box)}`);
  }
  const json = JSON.parse((await downloaded(page, "#download-json")).text);
  assert.equal(json.memory.peak, want.memory.peak);
  assert.equal(json.model.name, "llama-3.1-8b");
  assert.equal(json.optimizer, want.optimizer);
  assert.deepEqual(json.lora, want.lora, "the settings are the CLI's JSON");

  const { text: csvText } = await downloaded(page, "#download-csv");
  const rows = csvText.trim().split("\n").map((line) => line.split(","));
  assert.deepEqual(rows[0], ["section", "item", "value", "unit", "bytes"]);
  const row = (section, item) => rows.find((r) => r[0] === section && r[1] === item);
  assert.equal(row("model", "Model")[2], "llama-3.1-8b");
  assert.equal(row("setting", "Sequence length (tokens)")[2], "2048");
  assert.equal(row("setting", "LoRA rank (empty: full fine-tuning)")[2], "16");
  assert.equal(row("setting", "Optimizer")[2], "adamw");
  const peak = row("memory on the GPU", "peak of a step");
  assert.equal(peak[3], "GiB");
  assert.equal(Number(peak[4]), want.memory.peak);
  assert.equal(peak[2], (want.memory.peak / 2 ** 30).toFixed(2));
  assert.equal(row("verdict", "Verdict")[2], want.fits ? "fits" : "does not fit");

  const { text: md } = await downloaded(page, "#download-md");
  assert.match(md, /^# trainmem estimate: llama-3\.1-8b\n/);
  assert.match(md, /\| Sequence length \(tokens\) \| 2048 \|/);
  assert.match(md, /\| LoRA rank \(empty: full fine-tuning\) \| 16 \|/);
  assert.match(md, /\| piece \| memory on the GPU \(GiB\) \| bytes \|/);
  assert.ok(md.includes(`| peak of a step | ${(want.memory.peak / 2 ** 30).toFixed(2)} | ${want.memory.peak} |`), md);
  assert.match(md, want.fits ? /\*\*Verdict: fits\.\*\*/ : /\*\*Verdict: does not fit/);
  await page.close();
});

test("at 390 px the verdict stays pinned on top after an edit at the bottom of the form, and no menu is cut", async () => {
  const page = await open(390, 844);
  await answer(page);
  await page.screenshot({ path: path.join(root, "docs", "page-390.png") });
  // No menu's chosen text is wider than the menu.
  const cut = await page.evaluate(() => {
    const canvas = document.createElement("canvas").getContext("2d");
    return [...document.querySelectorAll("select")].filter((s) => s.offsetParent !== null).flatMap((s) => {
      const style = getComputedStyle(s);
      canvas.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
      const room = s.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 20;
      return [...s.options].filter((o) => canvas.measureText(o.text).width > room).map((o) => `${s.id}: "${o.text}" in ${room} px`);
    });
  });
  assert.deepEqual(cut, [], "every option's text fits its menu");
  // The last control of the form, changed at the bottom of the page.
  await page.locator("#units").scrollIntoViewIfNeeded();
  assert.ok(await page.evaluate(() => window.scrollY) > 800, "the form is scrolled");
  await page.selectOption("#units", "gib");
  await answer(page);
  const summary = await page.locator("#summary").boundingBox();
  assert.ok(summary && summary.y >= 0 && summary.y + summary.height <= 844, `the summary at ${JSON.stringify(summary)}`);
  assert.equal(await page.textContent("#summary-verdict"), await page.textContent("#verdict"));
  assert.match(await page.textContent("#summary-verdict"), /GiB/, "the summary is the new answer's");
  await page.close();
});

test("emptying the sequence length outlines Sequence length, in the page's words, and keeps the last answer marked stale", async () => {
  const page = await open(1400, 1000, "#model=llama-3.1-8b&micro-batch=1&seq-len=2048&precision=mixed-bf16&optimizer=adamw&device=rtx-4090-24gb&lora-rank=16&quantize=nf4");
  const good = await answer(page);
  await page.waitForSelector("#fit li");
  await page.screenshot({ path: path.join(root, "docs", "page-1400.png") });
  await page.fill("#seq-len", "");
  const got = await answer(page);
  assert.equal(await page.getAttribute("#seq-len", "aria-invalid"), "true");
  assert.equal(await page.getAttribute("#micro-batch", "aria-invalid"), null, "not the micro-batch");
  assert.match(got.error, /^Sequence length \(tokens\): /);
  assert.doesNotMatch(got.error, /--/, "no flags in the page's message");
  assert.match(await page.textContent("#field-seq-len .field-error"), /Sequence length/);
  assert.equal(got.hidden, false, "the last good answer stays visible");
  assert.equal(got.stale, true);
  assert.equal(await page.isVisible("#stale"), true);
  assert.equal(got.peak, good.peak);
  // Typing through an invalid value (2 -> 0 -> 0.5) never wipes it.
  for (const text of ["0", "0.5"]) {
    await page.fill("#seq-len", text);
    const during = await answer(page);
    assert.equal(during.hidden, false, `visible at ${text}`);
    assert.equal(during.stale, true, `stale at ${text}`);
    assert.equal(during.peak, good.peak);
  }
  await page.fill("#seq-len", "1024");
  const fixed = await answer(page);
  assert.equal(fixed.error, null);
  assert.equal(fixed.stale, false);
  assert.equal(await page.isVisible("#stale"), false);
  assert.equal(Number(fixed.peak), cli(["--model", "llama-3.1-8b", "--micro-batch", "1", "--seq-len", "1024", "--precision", "mixed-bf16", "--optimizer", "adamw", "--device", "rtx-4090-24gb", "--lora-rank", "16", "--quantize", "nf4"]).memory.peak);
  await page.close();
});


test("precision and optimizer names are explained under their menus, following the choice", async () => {
  const page = await open(1400, 1000, "#model=llama-3.2-1b&micro-batch=1&seq-len=1024&precision=mixed-bf16&optimizer=adamw&device=h100-80gb");
  await answer(page);
  const options = await page.evaluate(() => fetch("/api/options").then((r) => r.json()));
  const summary = (name) => options.precisions.find((p) => p.name === name).summary;
  assert.equal(await page.getAttribute("#precision", "aria-describedby"), "precision-hint");
  assert.equal(await page.isVisible("#precision-hint"), true, "a visible line, not only a tooltip");
  assert.equal(await page.textContent("#precision-hint"), summary("mixed-bf16"));
  for (const name of ["amp-bf16", "bf16", "mixed-fp16"]) {
    await page.selectOption("#precision", name);
    assert.equal(await page.textContent("#precision-hint"), summary(name), `the line follows the choice (${name})`);
  }
  // Each choice of the menu carries its explanation as its title.
  const titles = await page.$$eval("#precision option", (all) => all.map((o) => [o.value, o.title]));
  assert.deepEqual(titles, options.precisions.map((p) => [p.name, p.summary]));
  const adam8 = options.optimizers.find((o) => o.name === "adamw-8bit");
  await page.selectOption("#optimizer", "adamw-8bit");
  assert.equal(await page.textContent("#optimizer-hint"), `${adam8.title}: ${adam8.summary}`);
  await page.close();
});

test("a link sets what it names, and every control it leaves out goes back to its default", async () => {
  const page = await open(1400, 1000);
  await answer(page);
  // What every control of the form holds.
  const controls = () => page.$$eval("#groups input, #groups select", (all) => Object.fromEntries(all.map((c) => [c.id, c.type === "checkbox" ? c.checked : c.value])));
  const defaults = await controls();
  // A link that sets every control to something other than its default.
  const every = {
    "micro-batch": "4", "seq-len": "512", "grad-accumulation": "2", implementation: "litgpt", "keep-outputs": true, "carry-outputs": true,
    precision: "bf16", autocast: true, optimizer: "sgd", device: "a100-40gb", gpus: "4", zero: "2", fsdp: "full-shard", offload: "optimizer",
    tp: "2", pp: "2", cp: "2", ep: "2", "sequence-parallel": true, framework: "megatron",
    "lora-rank": "8", "lora-targets": "q_proj", quantize: "nf4", recompute: "full", "recompute-every": "2", attention: "eager",
    loss: "fused", "offload-activations": true, "optimizer-in-backward": true, units: "gib",
  };
  for (const [key, value] of Object.entries(every)) assert.notEqual(defaults[key], value, `${key} is not set to its default`);
  assert.deepEqual(Object.keys(every).sort(), Object.keys(defaults).filter((k) => k !== "capacity").sort(), "every control but the custom capacity is in the link");
  const link = "#model=qwen2.5-0.5b&" + new URLSearchParams(Object.entries(every).map(([k, v]) => [k, String(v)])).toString();
  await page.evaluate((hash) => { location.hash = hash; }, link);
  await answer(page);
  const set = await controls();
  for (const [key, value] of Object.entries(every)) assert.equal(set[key], value, `the link sets ${key}`);
  assert.equal(await page.inputValue("#model"), "qwen2.5-0.5b");
  // Then a hand-written link with the model only.
  await page.evaluate(() => { location.hash = "#model=gpt2"; });
  await answer(page);
  assert.equal(await page.inputValue("#model"), "gpt2");
  assert.deepEqual(await controls(), defaults, "every control the link leaves out is at its default");
  // A control emptied on purpose is in the link as empty, and stays so.
  await page.fill("#micro-batch", "");
  await answer(page);
  assert.match(page.url(), /[#&]micro-batch=(&|$)/);
  const again = await open(1400, 1000, page.url().slice(page.url().indexOf("#")));
  await answer(again);
  assert.equal(await again.inputValue("#micro-batch"), "");
  assert.equal(await again.inputValue("#seq-len"), defaults["seq-len"]);
  await again.close();
  await page.close();
});
