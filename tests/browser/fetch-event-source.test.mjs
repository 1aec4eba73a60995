// A real @microsoft/fetch-event-source client (bundled with esbuild, served from another
// origin, so through CORS) against triage: a full frontend-tool round trip, no retry storm on
// a 4xx when onopen/onerror are written as the README says, and a conversation's event stream
// cut mid-run and resumed with Last-Event-ID, missing nothing.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { join } from "node:path";
import { build } from "esbuild";
import { here, launchBrowser, newPage, screenshotPath, startCuttingProxy, startHarness } from "./harness.mjs";

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>fetch-event-source client</title>
<script src="/bundle.js"></script></head>
<body><h1>fetch-event-source client</h1><pre id="log"></pre></body></html>`;

let harness;
let browser;
let server;
let origin;
let proxy;

before(async () => {
  const bundled = await build({
    entryPoints: [join(here, "fes-client.mjs")],
    bundle: true,
    format: "iife",
    platform: "browser",
    target: "es2020",
    write: false,
    logLevel: "silent",
  });
  const bundle = bundled.outputFiles[0].text;
  server = createServer((req, res) => {
    if (req.url === "/") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end(PAGE);
    } else if (req.url === "/bundle.js") {
      res.writeHead(200, { "content-type": "text/javascript; charset=utf-8" });
      res.end(bundle);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${server.address().port}`;
  [harness, browser] = await Promise.all([
    startHarness({ corsOrigins: [origin] }),
    launchBrowser(),
  ]);
  proxy = await startCuttingProxy(harness.triage);
});

after(async () => {
  proxy?.close();
  await browser?.close();
  harness?.stop();
  server?.close();
});

async function clientPage() {
  const page = await newPage(browser);
  page.chatPosts = 0;
  page.on("request", (r) => {
    if (r.method() === "POST" && r.url().endsWith("/api/chat")) page.chatPosts += 1;
  });
  await page.goto(`${origin}/`);
  return page;
}

test("fetch-event-source: pause on a frontend tool, resume with its result, answer", async () => {
  await harness.script([
    {
      content: "Let me chart it.",
      tool_calls: [{ id: "call_chart", name: "show_chart", arguments: { metric: "cpu" } }],
      delay_ms: 500, // silence: the server sends keep-alive comments meanwhile
    },
    { text: "CPU peaked at **93%**.", delay_ms: 500 },
  ]);
  const page = await clientPage();
  const { events, keepAlives } = await page.evaluate((base) => window.fesDemo.runChat(base), harness.triage);

  assert.deepEqual(
    events.map((e) => `${e.request}:${e.name}`),
    [
      "1:token_count",
      "1:ai_message",
      "1:start_tool_calling",
      "1:token_count",
      "1:approval_required",
      "2:tool_calling_result",
      "2:token_count",
      "2:ai_answer_end",
    ],
  );
  const data = (i) => events[i].data;
  assert.equal(typeof data(0).metadata.tokens.total_tokens, "number");
  assert.equal(data(1).content, "Let me chart it.");
  assert.deepEqual(data(2), { tool_name: "show_chart", id: "call_chart" });
  assert.equal(data(4).requires_approval, true);
  assert.deepEqual(data(4).pending_approvals, []);
  assert.deepEqual(data(4).pending_frontend_tool_calls, [
    { tool_call_id: "call_chart", tool_name: "show_chart", arguments: { metric: "cpu" } },
  ]);
  assert.ok(Array.isArray(data(4).conversation_history));
  assert.equal(data(5).tool_call_id, "call_chart");
  assert.equal(data(5).result.status, "success");
  assert.equal(data(7).analysis, "CPU peaked at **93%**.");
  assert.ok(Array.isArray(data(7).conversation_history));
  assert.ok(keepAlives >= 1, "keep-alive comments arrived as empty messages and were skipped");
  assert.equal(page.chatPosts, 2, "two requests, no retries");

  // The LLM's second call saw the result the client sent.
  const requests = await harness.llmRequests();
  assert.equal(requests.length, 2);
  const tool = requests[1].messages.find((m) => m.role === "tool" && m.tool_call_id === "call_chart");
  assert.deepEqual(JSON.parse(tool.content), { rendered: true, metric: "cpu", peak: "93%" });

  await page.evaluate((lines) => {
    document.getElementById("log").textContent = lines.join("\n");
  }, events.map((e) => `request ${e.request}: ${e.name}`));
  await page.screenshot({ path: screenshotPath("fetch-event-source-events") });
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test("fetch-event-source: a 400 is one request when onopen throws and onerror rethrows", async () => {
  await harness.script([]);
  const page = await clientPage();
  const outcome = await page.evaluate((base) => window.fesDemo.runBadRequest(base), harness.triage);
  assert.equal(outcome.rejected, true);
  assert.equal(outcome.fatal, true);
  assert.match(outcome.message, /^HTTP 400: .*bash/);
  await page.waitForTimeout(1500); // longer than the library's 1 s retry interval
  assert.equal(page.chatPosts, 1, "exactly one request");
  assert.equal((await harness.llmRequests()).length, 0);
  await page.context().close();
});

test("fetch-event-source: with the library's default handlers a 400 is retried", async () => {
  const page = await clientPage();
  await page.evaluate((base) => window.fesDemo.runBadRequestWithDefaults(base, 2500), harness.triage);
  assert.ok(page.chatPosts >= 2, `the default handlers retried (${page.chatPosts} requests)`);
  await page.context().close();
});

test("fetch-event-source: a conversation's stream cut mid-run resumes with Last-Event-ID, missing nothing", async () => {
  const todo = (n) => ({ todos: [{ id: String(n), content: `step ${n}`, status: "in_progress" }] });
  await harness.script([
    ...[1, 2, 3].map((n) => ({ tool_calls: [{ id: `s${n}`, name: "TodoWrite", arguments: todo(n) }], delay_ms: 300 })),
    { text: "Three steps, done.", delay_ms: 300 },
  ]);
  const create = await fetch(`${harness.triage}/api/conversations`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ initial_message: { content: "Three steps" } }),
  });
  assert.equal(create.status, 201);
  const { id } = await create.json();
  const page = await clientPage();
  // Cross-origin, through a proxy that cuts the stream as a network failure would.
  const followed = page.evaluate(([base, id]) => window.fesDemo.followConversation(base, id), [proxy.url, id]);
  await page.waitForFunction(() => (window.fesConversation?.events.length ?? 0) >= 3);
  assert.equal(proxy.cut(), 1, "the open stream is cut mid-run");
  const { events, opens, errors } = await followed;

  const stored = await (await fetch(`${harness.triage}/api/conversations/${id}/events/search?limit=100`)).json();
  const ids = events.map((e) => e.id);
  assert.deepEqual(ids, stored.items.map((e) => e.id), "every stored event once, in order");
  assert.deepEqual(ids, Array.from({ length: ids.length }, (_, i) => i + 1), "ids 1, 2, 3 … without a gap");
  assert.deepEqual(events.map((e) => e.name), stored.items.map((e) => e.kind));
  assert.equal(events.at(-1).data.execution_status, "finished");
  assert.ok(events.some((e) => e.name === "ai_answer_end" && e.data.analysis === "Three steps, done."));
  assert.ok(opens >= 2 && errors.length >= 1, `reconnected (${opens} opens; ${errors.join(" | ")})`);
  const resumed = proxy.streamRequests.slice(1).map((r) => Number(r.lastEventId));
  assert.ok(resumed.length >= 1 && resumed[0] >= 3, `resumed with Last-Event-ID ${resumed[0]}`);
  assert.equal(proxy.streamRequests[0].lastEventId, null);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});
