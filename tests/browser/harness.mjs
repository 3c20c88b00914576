// What every browser test file shares: the server (`trainmem serve` on a
// free loopback port), one Chromium, the CLI to compare with, and the
// helpers that open the page and wait for its answer. A file calls
// `serve()` once at its top; `url`, `trainmem` and the others are then set
// for its tests.

import { before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const here = path.dirname(fileURLToPath(import.meta.url));
export const root = path.resolve(here, "..", "..");
export const shots = path.join(root, "target", "browser");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];
const STEP_MS = 15_000;
const SERVER_START_MS = 20_000;

export let trainmem, server, browser, url;
const problems = [];

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


export function cli(args) {
  return JSON.parse(execFileSync(trainmem, ["estimate", ...args, "--format", "json"], { encoding: "utf8" }));
}

export async function open(width, height, hash = "") {
  const page = await browser.newPage({ viewport: { width, height } });
  page.setDefaultTimeout(STEP_MS);
  page.on("pageerror", (error) => problems.push(error.message));
  // The browser logs each 400 answer; the error test asks for one on purpose.
  page.on("console", (message) => {
    if (message.type() === "error" && !/status of 400 \(Bad Request\)/.test(message.text())) problems.push(message.text());
  });
  await page.goto(url + hash);
  await page.waitForSelector('body[data-ready="1"]');
  return page;
}

// The text a download holds: `button` clicked, the file read.
export async function downloaded(page, button) {
  const [file] = await Promise.all([page.waitForEvent("download"), page.click(button)]);
  return { name: file.suggestedFilename(), text: readFileSync(await file.path(), "utf8") };
}

// Waits for the answer to settle after a change.
export async function settled(page) {
  await page.waitForTimeout(200);
  await page.waitForSelector('body[data-pending="0"]');
}

export async function answer(page) {
  await settled(page);
  return page.evaluate(() => ({
    peak: document.getElementById("result").dataset.peak,
    fits: document.getElementById("result").dataset.fits,
    drawn: document.getElementById("bar").dataset.drawnPeak,
    verdict: document.getElementById("verdict").textContent,
    hidden: document.getElementById("result").classList.contains("hidden"),
    stale: document.getElementById("result").classList.contains("stale"),
    error: document.getElementById("error").classList.contains("hidden") ? null : document.getElementById("error").textContent,
  }));
}

// `options.env`: variables added to the server's environment (a test hub's
// `HF_ENDPOINT`); `options.before`: run first, its answer awaited (to start
// that hub and say where it listens: it may return `{ env }`);
// `options.after`: run once the server is stopped (to stop the hub).
export function serve(options = {}) {
before(async () => {
  trainmem = binary();
  const prepared = options.before ? (await options.before()) || {} : {};
  // A variable given as `undefined` is removed from the server's environment.
  const env = Object.fromEntries(Object.entries({ ...process.env, ...(options.env || {}), ...(prepared.env || {}) }).filter(([, v]) => v !== undefined));
  const port = await freePort();
  url = `http://127.0.0.1:${port}/`;
  server = spawn(trainmem, ["serve", "--port", String(port), "--host", "127.0.0.1"], { stdio: ["ignore", "ignore", "inherit"], env });
  process.once("exit", () => { if (server.exitCode === null) server.kill("SIGKILL"); });
  await waitUntilServing(url, server);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60_000 });
  mkdirSync(shots, { recursive: true });
});

after(async () => {
  if (browser) await browser.close();
  if (server && server.exitCode === null) server.kill("SIGKILL");
  if (options.after) await options.after();
  assert.deepEqual(problems, [], "no script or console errors on the page");
});
}
