// The page of `trainmem serve` in a real browser (Debian's Chromium, driven
// by playwright-core): the totals it shows are the command line's, and a
// change of optimizer moves the total by exactly the CLI's difference.
//
// Run: cd tests/browser && npm ci && npm test   (needs /usr/bin/chromium)

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];
const STEP_MS = 15_000;
const SERVER_START_MS = 20_000;

function binary() {
  if (process.env.TRAINMEM_BIN) return process.env.TRAINMEM_BIN;
  execFileSync("cargo", ["build", "--quiet", "--bin", "trainmem"], { cwd: root, stdio: "inherit", timeout: 900_000 });
  return path.join(process.env.CARGO_TARGET_DIR || path.join(root, "target"), "debug", "trainmem");
}

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

async function waitUntilServing(url, server) {
  const deadline = Date.now() + SERVER_START_MS;
  while (Date.now() < deadline) {
    if (server.exitCode !== null) throw new Error(`trainmem serve exited with ${server.exitCode}`);
    try {
      const response = await fetch(url + "api/options", { signal: AbortSignal.timeout(2_000) });
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`trainmem serve did not answer within ${SERVER_START_MS} ms`);
}

async function totalFor(page, optimizer) {
  await page.selectOption("#optimizer", optimizer);
  await page.waitForSelector(
    `#total[data-optimizer="${optimizer}"][data-parameters="7000000000"]`,
    { timeout: STEP_MS },
  );
  await page.waitForSelector('body[data-pending="0"]', { timeout: STEP_MS });
  return Number(await page.getAttribute("#total", "data-bytes"));
}

test("the page's totals are the CLI's", async () => {
  const trainmem = binary();
  const cliMemory = (optimizer) =>
    JSON.parse(execFileSync(trainmem, ["estimate", "--params", "7B", "--optimizer", optimizer, "--format", "json"], { encoding: "utf8" }))
      .memory;
  const cliTotal = (optimizer) => cliMemory(optimizer).total;
  const [cliAdam, cliSgd] = [cliTotal("adam"), cliTotal("sgd")];
  // The verdict follows the step's peak: Adam's 112 GB of states plus its
  // optimizer step's 28 GB temporary is 60 GB over 80 GB.
  const adamOver = (cliMemory("adam").peak - 80e9) / 1e9;

  const port = await freePort();
  const url = `http://127.0.0.1:${port}/`;
  const server = spawn(trainmem, ["serve", "--port", String(port), "--host", "127.0.0.1"], { stdio: ["ignore", "ignore", "inherit"] });
  const stop = () => { if (server.exitCode === null) server.kill("SIGKILL"); };
  process.once("exit", stop);
  let browser;
  try {
    await waitUntilServing(url, server);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60_000 });
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    page.setDefaultTimeout(STEP_MS);
    const problems = [];
    page.on("pageerror", (error) => problems.push(error.message));

    const started = Date.now();
    await page.goto(url);
    await page.waitForSelector('body[data-ready="1"]');
    await page.locator("label", { has: page.locator("#source-params") }).click();
    await page.fill("#params", "7B");

    const adam = await totalFor(page, "adam");
    const sgd = await totalFor(page, "sgd");
    assert.equal(adam, cliAdam, "adam's total is the CLI's");
    assert.equal(sgd, cliSgd, "sgd's total is the CLI's");
    assert.equal(adam - sgd, cliAdam - cliSgd, "the total drops by the CLI's difference");
    assert.match(await page.textContent("#verdict"), /fits 80 GB: 24 GB spare/);

    await totalFor(page, "adam");
    assert.match(await page.textContent("#verdict"), new RegExp(`does not fit 80 GB: ${adamOver} GB over`));
    assert.equal(await page.textContent("#total"), "112 GB");
    await page.screenshot({ path: path.join(here, "screenshot.png"), fullPage: true });

    await page.fill("#params", "-5");
    await page.waitForSelector("#error.shown");
    assert.match(await page.textContent("#error"), /invalid parameter count `-5`/);
    await page.fill("#params", "7B");
    await page.waitForSelector("#error", { state: "hidden" });

    assert.deepEqual(problems, [], "no script errors on the page");
    console.log(`# browser steps took ${Date.now() - started} ms`);
  } finally {
    if (browser) await browser.close();
    stop();
  }
});
