// Shared helpers of the browser tests: the triage + fake LLM harness (examples/browser_harness.rs)
// and a headless Debian Chromium driven by playwright-core.

import { spawn } from "node:child_process";
import { createServer, request as httpRequest } from "node:http";
import { mkdtempSync, mkdirSync, readFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { chromium } from "playwright-core";

export const here = dirname(fileURLToPath(import.meta.url));
export const repo = join(here, "..", "..");
export const artifacts = join(here, "artifacts");
mkdirSync(artifacts, { recursive: true });

const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";

// Starts `cargo run --example browser_harness` (built beforehand by .ci/run) and waits for its
// port file. Returns { triage, triageKeyed?, triageBare, llm, script(steps), llmRequests(), stop() }.
// The triages keep their conversations in SQLite files under the harness's temp dir.
export async function startHarness({ corsOrigins = [], apiKey } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "triage-browser-"));
  const portFile = join(dir, "ports.json");
  const args = ["run", "--quiet", "--example", "browser_harness", "--"];
  args.push("--port-file", portFile, "--exit-on-stdin-close", "--data-dir", join(dir, "data"));
  for (const origin of corsOrigins) args.push("--cors-origin", origin);
  if (apiKey) args.push("--api-key", apiKey);
  let stderr = "";
  const child = spawn("cargo", args, {
    cwd: repo,
    detached: true, // own process group: stop() ends cargo and the harness together
    stdio: ["pipe", "ignore", "pipe"], // stdin closes if this process dies: the harness exits
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG || "warn" },
  });
  child.stderr.on("data", (d) => {
    stderr = (stderr + d).slice(-20000);
  });
  let exited = null;
  child.on("exit", (code, signal) => {
    exited = { code, signal };
  });

  const deadline = Date.now() + 180_000; // a cold build, when .ci/run did not build first
  while (!existsSync(portFile)) {
    if (exited) throw new Error(`browser_harness exited (${JSON.stringify(exited)}):\n${stderr}`);
    if (Date.now() > deadline) {
      killGroup(child);
      throw new Error(`browser_harness did not start in time:\n${stderr}`);
    }
    await sleep(50);
  }
  const ports = JSON.parse(readFileSync(portFile, "utf8"));
  const llm = `http://127.0.0.1:${ports.llm}`;
  const llmScript = `http://127.0.0.1:${ports.llm_script}`;
  return {
    triage: `http://127.0.0.1:${ports.triage}`,
    triageKeyed: ports.triage_keyed ? `http://127.0.0.1:${ports.triage_keyed}` : undefined,
    triageBare: `http://127.0.0.1:${ports.triage_bare}`, // no model configured
    llm,
    stderr: () => stderr,
    async script(steps) {
      const r = await fetch(`${llmScript}/script`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(steps),
      });
      if (!r.ok) throw new Error(`script refused: ${r.status} ${await r.text()}`);
    },
    async llmRequests() {
      return (await fetch(`${llmScript}/requests`)).json();
    },
    stop() {
      killGroup(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function killGroup(child) {
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // already gone
  }
}

export async function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
}

// A new page that fails the test on uncaught page errors and keeps console errors for messages.
export async function newPage(browser, { width = 1366, height = 860 } = {}) {
  const context = await browser.newContext({ viewport: { width, height } });
  context.setDefaultTimeout(15_000);
  const page = await context.newPage();
  page.errors = [];
  page.on("pageerror", (e) => page.errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    // Refused requests are logged by the browser itself; the tests assert those on the page.
    if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) {
      page.errors.push(`console: ${m.text()}`);
    }
  });
  return page;
}

export function screenshotPath(name) {
  return join(artifacts, `${name}.png`);
}

// A reverse proxy to `target` (a triage URL) that can cut the event streams passing through
// it, as a dropped network connection would: the browser sees the response body fail midway.
// Returns { url, streamRequests: [{ path, lastEventId }], cut() → how many were cut, close() }.
export async function startCuttingProxy(target) {
  const upstream = new URL(target);
  const open = new Set();
  const streamRequests = [];
  const server = createServer((req, res) => {
    const isStream = req.method === "GET" && req.url.includes("/events/stream");
    if (isStream) streamRequests.push({ path: req.url, lastEventId: req.headers["last-event-id"] ?? null });
    const forward = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
        if (!isStream) return;
        const pair = { res, answer };
        open.add(pair);
        res.on("close", () => {
          open.delete(pair);
          answer.destroy();
        });
      },
    );
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    streamRequests,
    cut() {
      const n = open.size;
      for (const { res, answer } of open) {
        res.destroy();
        answer.destroy();
      }
      open.clear();
      return n;
    },
    close() {
      this.cut();
      server.closeAllConnections();
      server.close();
    },
  };
}
