// The answer side of the page (issue 27): suggestions applied alone and
// undone with Back, reserved memory and step time shown as the API gives
// them, the plan panel against `trainmem plan`, the table reconciled with
// the bar, the charts' axes, labels and text sizes, and the labels of the
// tables. Each figure is checked against the CLI or the API.
//
// Run: cd tests/browser && npm ci && npm test   (needs /usr/bin/chromium)

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { serve, cli, open, answer, root, url, trainmem } from "./harness.mjs";

serve();

// The page's flags of a link, as the CLI spells them.
function flagsOf(hash) {
  const flags = [];
  for (const [k, v] of new URLSearchParams(hash.replace(/^.*#/, ""))) {
    if (k === "source" || k === "units") continue;
    flags.push("--" + k);
    if (v !== "true") flags.push(v);
  }
  return flags;
}

// `base` with `changes` (flags) set over it, as one command line: a flag
// the change gives replaces the base's (and --zero and --fsdp each other's).
function over(base, changes) {
  const pairs = (flags) => {
    const out = [];
    for (let i = 0; i < flags.length; i++) {
      const next = flags[i + 1];
      if (next === undefined || next.startsWith("--")) out.push([flags[i]]);
      else { out.push([flags[i], next]); i++; }
    }
    return out;
  };
  const changed = pairs(changes);
  const names = new Set(changed.map(([f]) => f));
  if (names.has("--zero")) names.add("--fsdp");
  if (names.has("--fsdp")) names.add("--zero");
  return pairs(base).filter(([f]) => !names.has(f)).concat(changed).flat();
}

function techniques(flags) {
  return JSON.parse(execFileSync(trainmem, ["techniques", ...flags, "--format", "json"], { encoding: "utf8" }));
}

async function api(path, body) {
  const response = await fetch(url + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: response.status, body: await response.json() };
}

test("a suggestion applies alone, with its cost, and Back undoes it", async () => {
  // 8B full fine-tuning on one H100 does not fit; the advisor offers offload, sharding on more GPUs, ...
  const hash = "#model=llama-3.1-8b&micro-batch=1&seq-len=2048&precision=mixed-bf16&optimizer=adamw&device=h100-80gb&gpus=1";
  const page = await open(1400, 1000, hash);
  const before = await answer(page);
  assert.equal(before.fits, "false");
  await page.waitForSelector("#fit li[data-keys]");
  const offered = await page.$$eval("#fit li[data-keys]", (items) => items.map((li) => ({ peak: Number(li.dataset.peak), keys: JSON.parse(li.dataset.keys), text: li.textContent })));
  const ladder = techniques(flagsOf(page.url()));
  assert.deepEqual(offered.map((o) => o.peak), ladder.rungs.slice(1).map((r) => r.peak), "the advisor's answers, in its order");
  // Each answer is priced alone on the run shown: the CLI with exactly its flags.
  for (const [i, rung] of ladder.rungs.slice(1).entries()) {
    const alone = cli(over(flagsOf(page.url()), rung.flags));
    assert.equal(alone.memory.peak, offered[i].peak, `${rung.technique} applies alone`);
    assert.match(offered[i].text, rung.change < 0 ? /\(−/ : /\(\+/, "the change is signed");
    assert.match(offered[i].text, /step \d/, "the step time it costs");
  }
  // Sharding on more GPUs, offload, and the plan are among them.
  assert.ok(offered.some((o) => o.keys.gpus && o.keys.zero), "more GPUs, sharded");
  assert.ok(offered.some((o) => o.keys.offload), "offload");
  assert.match(offered.find((o) => o.keys.offload).text, /host memory \+/, "offload says its host memory");
  assert.equal(await page.isVisible("#fit-open-plan"), true, "open in plan");

  // Applied: the peak is the CLI's with exactly that answer's flags.
  const index = offered.findIndex((o) => o.keys.offload === "optimizer");
  const rung = ladder.rungs[index + 1];
  const old = page.url();
  await page.locator("#fit li[data-keys]").nth(index).locator("button").click();
  const applied = await answer(page);
  assert.equal(Number(applied.peak), cli(over(flagsOf(old), rung.flags)).memory.peak);
  assert.equal(Number(applied.peak), offered[index].peak);
  assert.notEqual(page.url(), old);
  assert.equal(await page.inputValue("#offload"), "optimizer");
  // Back: the old setup and its peak return.
  await page.goBack();
  const undone = await answer(page);
  assert.equal(page.url(), old);
  assert.equal(undone.peak, before.peak);
  assert.equal(await page.inputValue("#offload"), "none");
  await page.close();
});

test("reserved memory, the verdict on it and the step time are the API's", async () => {
  const request = { model: "llama-3.1-8b", "micro-batch": 1, "seq-len": 2048, precision: "mixed-bf16", optimizer: "adamw", device: "h100-80gb", gpus: 8, zero: "3" };
  const hash = "#" + new URLSearchParams(Object.entries(request).map(([k, v]) => [k, String(v)])).toString();
  const page = await open(1400, 1000, hash);
  await answer(page);
  const { body } = await api("api/estimate", request);
  const shown = await page.evaluate(() => ({ ...document.getElementById("result").dataset, reservedLine: document.getElementById("reserved-line").textContent, timeLine: document.getElementById("time-line").textContent }));
  assert.equal(Number(shown.reserved), body.memory.reserved);
  assert.equal(Number(shown.stepTime), body.time.step_time_s);
  assert.equal(shown.verdict, body.fits ? "fits" : body.fits_allocated ? "tight" : "over");
  const gb = (b) => (b / 1e9 >= 100 ? (b / 1e9).toFixed(1) : (b / 1e9).toFixed(2)).replace(/\.?0+$/, "");
  assert.match(shown.reservedLine, new RegExp(`Reserved by the allocator: ${gb(body.memory.reserved).replace(".", "\\.")} GB`));
  assert.match(shown.timeLine, new RegExp(`mean error is ${Math.round(100 * body.time.uncertainty.mean_abs_error)}%`), "the stated uncertainty");
  assert.match(shown.timeLine, /approximate/);
  // The precision recipe explained in the API's words.
  assert.match(await page.textContent("#recipe-line"), new RegExp(`Precision mixed-bf16: ${body.precision.summary.slice(0, 20).replace(/[()+]/g, "\\$&")}`));
  // A tight case: the peak fits, the reservation does not.
  let tight = null;
  for (const seq of [8192, 8448]) {
    const r = { model: "llama-3.1-8b", "micro-batch": 1, "seq-len": seq, precision: "mixed-bf16", optimizer: "adamw", device: "h100-80gb", gpus: 8, zero: "3", recompute: "selective" };
    const answerOf = (await api("api/estimate", r)).body;
    if (answerOf.fits === false && answerOf.fits_allocated === true) {
      await page.fill("#seq-len", String(seq)); await page.selectOption("#recompute", "selective");
      const got = await answer(page);
      assert.equal(await page.getAttribute("#result", "data-verdict"), "tight");
      assert.match(got.verdict, /tight/);
      tight = seq;
      break;
    }
  }
  assert.notEqual(tight, null, "a tight case was found and shown");
  await page.close();
});

test("two GPUs without sharding hint to shard, and the plan panel is `trainmem plan`", async () => {
  const hash = "#model=llama-3.1-8b&micro-batch=1&seq-len=2048&precision=mixed-bf16&optimizer=adamw&device=h100-80gb&gpus=2";
  const page = await open(1400, 1000, hash);
  await answer(page);
  assert.equal(await page.isVisible("#shard-hint"), true);
  assert.match(await page.textContent("#shard-hint"), /2 GPUs, each holds a full copy.*shard them with ZeRO or FSDP/);
  await page.click("#shard-plan");
  await page.waitForSelector("#plan-table tbody tr");
  await page.waitForSelector('body[data-plan-pending="0"]');
  const want = JSON.parse(execFileSync(trainmem, ["plan", "--model", "llama-3.1-8b", "--micro-batch", "1", "--seq-len", "2048", "--precision", "mixed-bf16", "--optimizer", "adamw", "--device", "h100-80gb", "--gpus", "2", "--attention", "sdpa", "--implementation", "transformers", "--format", "json"], { encoding: "utf8" }));
  const rows = await page.$$eval("#plan-table tbody tr", (trs) => trs.map((tr) => ({ peak: Number(tr.dataset.peak), flags: JSON.parse(tr.dataset.flags) })));
  assert.ok(rows.length > 0 && rows.length <= 5);
  assert.deepEqual(rows[0].flags, want.layouts[0].flags, "the top layout is the CLI's");
  assert.deepEqual(rows.map((r) => r.peak), want.layouts.slice(0, rows.length).map((l) => l.peak));
  // One click applies it: the peak is `estimate` with that layout.
  const old = page.url();
  await page.locator("#plan-table tbody tr").first().locator("button").click();
  const got = await answer(page);
  const base = want.base_flags;
  assert.equal(Number(got.peak), cli([...base, ...want.layouts[0].flags]).memory.peak);
  assert.equal(Number(got.peak), rows[0].peak);
  assert.equal(await page.isVisible("#shard-hint"), false, "sharded now");
  await page.goBack();
  await answer(page);
  assert.equal(page.url(), old, "Back returns to the unsharded setup");
  // The API refuses what it must, in one line.
  const refused = await api("api/plan", { model: "llama-3.1-8b", "seq-len": 2048, gpus: 2, device: "h100-80gb", exhaustive: true });
  assert.equal(refused.status, 400);
  assert.match(refused.body.error, /^error: invalid key `exhaustive`/);
  const path = await api("api/plan", { model: "../x", "seq-len": 2048, gpus: 2, device: "h100-80gb" });
  assert.equal(path.status, 400);
  await page.close();
});

// The flags a layout sets: the plan panel leaves them to the search.
const LAYOUT_FLAGS = ["--framework", "--zero", "--fsdp", "--tp", "--pp", "--cp", "--ep", "--sequence-parallel", "--offload", "--recompute", "--recompute-every", "--loss", "--offload-activations"];

// A link's flags less the layout's: the plan's base.
function planBase(link) {
  const out = [];
  const flags = flagsOf(link);
  for (let i = 0; i < flags.length; i++) {
    const takesValue = flags[i + 1] !== undefined && !flags[i + 1].startsWith("--");
    if (!LAYOUT_FLAGS.includes(flags[i])) out.push(...flags.slice(i, i + (takesValue ? 2 : 1)));
    if (takesValue) i++;
  }
  return out;
}

// The plan panel opened on `gpus` GPUs of `device` and searched; its rows.
async function planRows(page, gpus, device) {
  await page.click("#plan-title");
  await page.fill("#plan-gpus", String(gpus));
  await page.selectOption("#plan-device", device);
  await page.click("#plan-run");
  // The search waits for the advisor's suggestions (heavy work both) on a debug build.
  await page.waitForSelector("#plan-table:not(.hidden) tbody tr", { timeout: 90_000 });
  await page.waitForSelector('body[data-plan-pending="0"]', { timeout: 90_000 });
  return page.$$eval("#plan-table tbody tr", (trs) => trs.map((tr) => ({ peak: Number(tr.dataset.peak), flags: JSON.parse(tr.dataset.flags) })));
}

test("layouts on the context-parallel and Megatron axes apply from the plan panel", async () => {
  // 32k tokens of a 0.5B model on four 24 GB cards: sharded, recomputed and with the fused loss it fits.
  const hash = "#model=qwen2.5-0.5b&micro-batch=1&seq-len=32768&precision=mixed-bf16&optimizer=adamw&device=rtx-4090-24gb&gpus=4&fsdp=full-shard&recompute=full&loss=fused";
  const page = await open(1400, 1000, hash);
  assert.equal((await answer(page)).fits, "true");
  const rows = await planRows(page, 4, "rtx-4090-24gb");
  const want = JSON.parse(execFileSync(trainmem, ["plan", ...planBase(hash), "--format", "json"], { encoding: "utf8", maxBuffer: 1 << 28 }));
  assert.deepEqual(rows.map((r) => r.flags), want.layouts.slice(0, rows.length).map((l) => l.flags), "the panel's layouts are `trainmem plan`'s (its default axes)");
  // A context-parallel layout, one that recomputes every n-th layer if the search keeps one.
  const every = rows.findIndex((r) => r.flags.includes("--cp") && r.flags.includes("--recompute-every"));
  const cp = every >= 0 ? every : rows.findIndex((r) => r.flags.includes("--cp"));
  const megatron = rows.findIndex((r) => r.flags.join(" ").includes("--framework megatron"));
  assert.ok(cp >= 0 && megatron >= 0 && cp !== megatron, `a context-parallel and a Megatron layout among ${JSON.stringify(rows.map((r) => r.flags))}`);
  for (const index of [cp, megatron]) {
    const row = rows[index];
    const before = page.url();
    const button = page.locator("#plan-table tbody tr").nth(index).locator("button");
    assert.equal(await button.isDisabled(), false, `layout ${row.flags.join(" ")} applies`);
    await button.click();
    const got = await answer(page);
    assert.equal(got.error, null, `applied alone: ${row.flags.join(" ")}`);
    assert.equal(Number(got.peak), row.peak, "the applied layout's peak is the row's");
    // The layout's settings replace the setup's (those it leaves out are at their defaults).
    assert.equal(Number(got.peak), cli(over(planBase(before), row.flags)).memory.peak, "and `estimate` with its flags");
    const value = (flag) => row.flags[row.flags.indexOf(flag) + 1];
    if (index === cp) {
      assert.equal(await page.inputValue("#cp"), value("--cp"));
      assert.equal(await page.inputValue("#tp"), row.flags.includes("--tp") ? value("--tp") : "1");
      assert.equal(await page.inputValue("#recompute-every"), row.flags.includes("--recompute-every") ? value("--recompute-every") : "1");
      assert.equal(await page.isChecked("#sequence-parallel"), row.flags.includes("--sequence-parallel"));
    } else {
      assert.equal(await page.inputValue("#framework"), "megatron");
      assert.equal(await page.isChecked("#sequence-parallel"), row.flags.includes("--sequence-parallel"));
    }
    await page.goBack();
    await answer(page);
    assert.equal(page.url(), before, "Back returns to the setup before the layout");
    assert.equal(await page.inputValue("#cp"), "1");
    assert.equal(await page.inputValue("#framework"), "");
    assert.equal(await page.inputValue("#fsdp"), "full-shard");
  }
  await page.close();
});

test("a pasted config.json is planned, and a layout of it applied", async () => {
  const config = readFileSync(path.join(root, "presets", "llama-3.2-1b.json"), "utf8");
  const dir = mkdtempSync(path.join(os.tmpdir(), "trainmem-plan-config-"));
  const file = path.join(dir, "config.json");
  writeFileSync(file, config);
  const page = await open(1400, 1000, "#model=llama-3.2-1b&micro-batch=1&seq-len=1024&precision=mixed-bf16&optimizer=adamw&device=h100-80gb&gpus=1");
  await answer(page);
  await page.click("#source-config");
  await page.fill("#config", config);
  const pasted = await answer(page);
  assert.equal(pasted.error, null);
  assert.equal(pasted.fits, "true");
  const base = planBase(page.url());
  const rows = await planRows(page, 4, "rtx-4090-24gb");
  assert.match(await page.textContent("#plan-command"), /^trainmem plan --model config\.json /);
  const want = JSON.parse(execFileSync(trainmem, ["plan", "--model", file, ...over(base, ["--gpus", "4", "--device", "rtx-4090-24gb"]), "--format", "json"], { encoding: "utf8", maxBuffer: 1 << 28 }));
  rmSync(dir, { recursive: true, force: true });
  assert.ok(rows.length > 0);
  assert.deepEqual(rows, want.layouts.slice(0, rows.length).map((l) => ({ peak: l.peak, flags: l.flags })), "the pasted config's layouts are the file's");
  await page.locator("#plan-table tbody tr").first().locator("button").click();
  const got = await answer(page);
  assert.equal(got.error, null);
  assert.equal(Number(got.peak), rows[0].peak, "the layout applied to the pasted config");
  assert.equal(await page.inputValue("#gpus"), "4");
  await page.close();
});

test("the table's rows at the peak sum to the drawn peak, each piece explained", async () => {
  const page = await open(1400, 1000, "#model=llama-3.1-8b&micro-batch=1&seq-len=2048&precision=mixed-bf16&optimizer=adamw&device=h100-80gb");
  const got = await answer(page);
  const cells = await page.$$eval("#pieces td[data-at-peak]", (tds) => tds.map((td) => Number(td.dataset.atPeak)));
  assert.equal(cells.reduce((a, b) => a + b, 0), Number(got.drawn));
  assert.equal(Number(got.drawn), Number(got.peak));
  const names = await page.$$eval("#pieces tbody tr[data-kind]", (trs) => trs.map((tr) => tr.dataset.kind));
  assert.ok(names.includes("temporaries") && names.includes("overhead"), `temporaries and overhead rows: ${names}`);
  const totals = await page.$$eval("#pieces tr[data-total] th", (ths) => ths.map((th) => th.textContent));
  assert.match(totals[0], /^steady total/);
  assert.match(totals[1], /^peak of a step/);
  assert.match(await page.textContent("#pieces-hint"), /steady total adds the five pieces as if all were held at once/);
  // Explained on hover (title) and reachable by Tab and tap (a disclosure).
  const summary = page.locator("#pieces tr[data-kind=temporaries] summary");
  assert.match(await summary.getAttribute("title"), /Short-lived buffers/);
  await summary.focus();
  await page.keyboard.press("Enter");
  assert.equal(await page.locator("#pieces tr[data-kind=temporaries] details").evaluate((d) => d.open), true);
  assert.equal(await page.locator("#pieces tr[data-kind=temporaries] .why").isVisible(), true);
  // The caption names the unit of the figures; no column is headed "bytes".
  const headings = await page.$$eval("#pieces thead th", (ths) => ths.map((th) => th.textContent));
  assert.deepEqual(headings, ["piece", "dtype", "steady", "at the peak", "share"]);
  assert.match(await page.textContent("#pieces caption"), /^Memory per GPU, in GB \(10⁹ bytes\)/, "the unit of the figures");
  assert.match(await page.textContent("#bar-hint"), /temporaries/);
  await page.close();
});

test("charts: axes with units, a labelled capacity line, fixed text sizes, focusable values", async () => {
  const hash = "#model=llama-3.1-8b&micro-batch=1&seq-len=2048&precision=mixed-bf16&optimizer=adamw&device=h100-80gb";
  const measure = async (width, height) => {
    const page = await open(width, height, hash);
    await answer(page);
    await page.locator("#timeline").scrollIntoViewIfNeeded();
    const m = await page.evaluate(() => {
      const ticks = [...document.querySelectorAll("#timeline text.tick")];
      const px = (node) => node.getBoundingClientRect().height;
      const bar = document.getElementById("bar");
      const line = bar.querySelector("#capacity-line").getBoundingClientRect();
      const label = bar.querySelector("#capacity-label").getBoundingClientRect();
      const colours = [...document.querySelectorAll(".capacity-line")].map((l) => getComputedStyle(l).stroke);
      return {
        ticks: ticks.map((t) => t.textContent), tick: px(ticks[1]), phase: px(document.querySelector("#timeline text.phase-label")),
        capacityLabels: [...document.querySelectorAll(".capacity-label")].map((t) => t.textContent),
        overlap: !(label.bottom <= line.top || label.right <= line.left || label.left >= line.right),
        colours, optimizer: getComputedStyle(document.documentElement).getPropertyValue("--optimizer_states").trim(),
        bad: getComputedStyle(document.documentElement).getPropertyValue("--bad").trim(),
      };
    });
    return { page, m };
  };
  const wide = await measure(1400, 1000);
  const phone = await measure(390, 844);
  for (const { m } of [wide, phone]) {
    assert.ok(m.ticks.length >= 3, `y ticks: ${m.ticks}`);
    assert.ok(m.ticks.every((t) => /^\d+(\.\d+)? GB$/.test(t)), `ticks carry the unit: ${m.ticks}`);
    assert.equal(m.capacityLabels.length, 2, "the capacity line is labelled in both charts");
    assert.ok(m.capacityLabels.every((t) => /^capacity 85\.52 GB$/.test(t)), m.capacityLabels.join("|"));
    assert.equal(m.overlap, false, "the capacity label is beside its line, not on it");
    assert.equal(new Set(m.colours).size, 1, `one capacity colour: ${m.colours}`);
    assert.notEqual(m.optimizer.toLowerCase(), "#e15759", "optimizer states are not red");
  }
  assert.ok(Math.abs(wide.m.tick - phone.m.tick) < 0.5, `tick text ${wide.m.tick} px at 1400, ${phone.m.tick} px at 390`);
  assert.ok(Math.abs(wide.m.phase - phone.m.phase) < 0.5, `phase text ${wide.m.phase} px at 1400, ${phone.m.phase} px at 390`);
  assert.ok(phone.m.tick >= 10, `phone text is ${phone.m.tick} px`);
  // Values by keyboard and by tap: the segments take focus and say their value.
  const page = phone.page;
  const segments = await page.$$eval("#bar rect[data-kind]", (rects) => rects.map((r) => [r.getAttribute("tabindex"), r.getAttribute("aria-label")]));
  assert.ok(segments.length >= 3 && segments.every(([t, l]) => t === "0" && /GB/.test(l)), JSON.stringify(segments));
  await page.locator("#bar rect[data-kind=weights]").focus();
  assert.match(await page.textContent("#readout"), /^weights: 16\.06 GB/);
  await page.locator("#timeline g[data-phase=forward]").click();
  assert.match(await page.textContent("#readout"), /^forward: starts at/);
  await wide.page.close();
  await phone.page.close();
});

test("labels: host memory per node, the precision explained", async () => {
  const page = await open(1400, 1000, "#model=llama-3.1-8b&micro-batch=1&seq-len=2048&precision=mixed-bf16&optimizer=adamw&device=h100-80gb&gpus=8&offload=optimizer");
  await answer(page);
  const want = cli(["--model", "llama-3.1-8b", "--micro-batch", "1", "--seq-len", "2048", "--precision", "mixed-bf16", "--optimizer", "adamw", "--device", "h100-80gb", "--gpus", "8", "--offload", "optimizer"]);
  assert.match(await page.textContent("#host-pieces caption"), /^Host \(CPU\) memory per node, for its 8 GPU processes/);
  const total = await page.$eval("#host-pieces tr[data-kind=total]", (tr) => [...tr.cells].map((c) => c.textContent));
  assert.equal(total[1], (want.host.total / 1e9).toFixed(1), "the per-node figure is the API's host total");
  assert.equal(total[2], (want.host.total / 8 / 1e9).toFixed(1));
  assert.match(await page.textContent("#recipe-line"), /^Precision mixed-bf16: /);
  await page.close();
});
