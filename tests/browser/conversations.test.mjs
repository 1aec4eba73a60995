// The console's conversations view in a real browser: server-side conversations created through
// the API, listed, opened (history replayed from the store, then live), approved through the
// button, paused, interrupted, resumed; and a stream cut mid-run that ends with every event
// shown exactly once.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { launchBrowser, newPage, screenshotPath, startCuttingProxy, startHarness } from "./harness.mjs";

const API_KEY = `conv-key-${randomBytes(6).toString("hex")}`;
let harness;
let browser;
let proxy;

before(async () => {
  [harness, browser] = await Promise.all([startHarness({ apiKey: API_KEY }), launchBrowser()]);
  proxy = await startCuttingProxy(harness.triage);
});

after(async () => {
  proxy?.close();
  await browser?.close();
  harness?.stop();
});

async function api(method, path, body) {
  const response = await fetch(`${harness.triage}${path}`, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return JSON.parse(text);
}

// Every stored event id of a conversation, in order.
async function storedIds(id) {
  const ids = [];
  let pageId = null;
  do {
    const query = new URLSearchParams({ limit: "100" });
    if (pageId) query.set("page_id", pageId);
    const page = await api("GET", `/api/conversations/${id}/events/search?${query}`);
    ids.push(...page.items.map((e) => e.id));
    pageId = page.next_page_id;
  } while (pageId);
  return ids;
}

async function waitForStatus(id, status) {
  for (let i = 0; i < 200; i++) {
    const info = await api("GET", `/api/conversations/${id}`);
    if (info.execution_status === status) return info;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`conversation ${id} never became ${status}`);
}

const snapshot = (page) => page.evaluate(() => window.triageConversations.snapshot());

function assertExactlyOnce(snap, stored) {
  const dups = snap.received.filter((id, i) => snap.received.indexOf(id) !== i);
  assert.deepEqual(dups, [], "the server sent no event twice");
  assert.deepEqual(snap.applied, stored, "every stored event shown once, in order, none missing");
}

test("conversations: listed with badges, opened live, approved through the button", async () => {
  const marker = `/tmp/triage-browser-conv-${randomBytes(6).toString("hex")}`;
  rmSync(marker, { force: true });
  await harness.script([
    {
      content: "Checking <img src=x onerror=\"window.__pwned=1\"> first.",
      tool_calls: [{ id: "risky", name: "bash", arguments: { command: `touch ${marker}` } }],
      delay_ms: 300,
    },
    { text: "Created **the marker**.\n\n<script>window.__pwned=1</script>", delay_ms: 300 },
  ]);
  const title = "<img src=x onerror=\"window.__pwned=1\"> marker";
  const created = await api("POST", "/api/conversations", {
    title,
    initial_message: { content: "Create the marker <b>now</b>" },
  });
  const page = await newPage(browser);
  try {
    await page.goto(`${harness.triage}/`);
    assert.equal(await page.locator("#transcript").isVisible(), true, "the chat view comes first");
    await page.click("#view-conversations");
    assert.equal(await page.locator("#transcript").isVisible(), false);
    const item = page.locator(`.conv-item[data-id='${created.id}']`);
    await item.waitFor();
    assert.equal(await item.locator(".conv-item-title").textContent(), title, "a title is text");
    await item.locator("button").click();
    assert.match(page.url(), new RegExp(`#conversations/${created.id}$`));

    // Live: the run pauses on the risky call; the approval panel appears.
    const panel = page.locator("#conv-approvals .approval");
    await panel.waitFor();
    assert.equal(await panel.locator(".approval-desc").textContent(), `touch ${marker}`);
    assert.equal(await page.locator("#conv-badge .badge").getAttribute("data-status"), "waiting_for_confirmation");
    assert.equal(await page.locator("#conv-send").isDisabled(), true, "no message while an approval is due");
    assert.equal(existsSync(marker), false, "nothing ran before approval");
    const log = page.locator("#conv-log");
    assert.equal(await log.locator(".msg.user .user-text").first().textContent(), "Create the marker <b>now</b>");
    assert.match(await log.locator(".ai-message").first().textContent(), /Checking <img src=x onerror="window.__pwned=1"> first\./);
    await page.screenshot({ path: screenshotPath("conversations-approval") });

    await panel.locator("button.approve").click();
    const answer = log.locator(".answer");
    await answer.waitFor();
    assert.equal(await answer.locator("strong").textContent(), "the marker");
    await page.locator("#conv-badge .badge[data-status='finished']").waitFor();
    assert.equal(existsSync(marker), true, "the approved command ran");
    assert.equal(await page.locator("#conv-approvals .approval").count(), 0, "nothing pending any more");
    assert.equal(await log.locator("details.tool[data-tool-call-id='risky'] .status").getAttribute("data-status"), "no_data");
    await item.locator(".badge[data-status='finished']").waitFor(); // the list follows
    assert.equal(await page.locator("img, script:not([src])").count(), 0, "model and user HTML never became markup");
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    assertExactlyOnce(await snapshot(page), await storedIds(created.id));
    await page.screenshot({ path: screenshotPath("conversations-finished") });

    // A reload replays the same history from the store.
    await page.reload();
    await page.locator("#conv-log .answer").waitFor();
    await page.waitForFunction((n) => window.triageConversations.snapshot().applied.length >= n, (await storedIds(created.id)).length);
    assertExactlyOnce(await snapshot(page), await storedIds(created.id));
    assert.equal(await page.locator("#conv-log .msg.user").count(), 1);

    // The chat view is still there, unchanged.
    await page.click("#view-chat");
    assert.equal(await page.locator("#transcript").isVisible(), true);
    assert.equal(await page.locator("#conversations-view").isVisible(), false);
    assert.equal(new URL(page.url()).hash, "");
    assert.deepEqual(page.errors, []);
  } finally {
    rmSync(marker, { force: true });
    await page.context().close();
  }
});

test("conversations: a stream cut mid-run resumes with Last-Event-ID, each event shown once", async () => {
  const todo = (n) => ({ todos: [{ id: String(n), content: `step ${n}`, status: "in_progress" }] });
  await harness.script([
    ...[1, 2, 3, 4].map((n) => ({ tool_calls: [{ id: `t${n}`, name: "TodoWrite", arguments: todo(n) }], delay_ms: 300 })),
    { text: "All four steps done.", delay_ms: 300 },
  ]);
  const created = await api("POST", "/api/conversations", { initial_message: { content: "Go step by step" } });
  const page = await newPage(browser);
  try {
    // Through the proxy, which can cut the stream as a network failure would.
    await page.goto(`${proxy.url}/#conversations/${created.id}`);
    await page.waitForFunction(() => window.triageConversations.snapshot().applied.length >= 3);
    assert.equal(proxy.cut(), 1, "one stream was open and is cut");
    await page.locator("#conv-live[data-state='reconnecting'], #conv-live[data-state='live']").waitFor();
    await page.locator("#conv-log .answer").waitFor({ timeout: 20_000 });
    await page.locator("#conv-badge .badge[data-status='finished']").waitFor();
    const stored = await storedIds(created.id);
    await page.waitForFunction((n) => window.triageConversations.snapshot().lastId >= n, stored.at(-1));

    const snap = await snapshot(page);
    assertExactlyOnce(snap, stored);
    assert.ok(proxy.streamRequests.length >= 2, "the stream was opened again");
    const resumedAt = Number(proxy.streamRequests[1].lastEventId);
    assert.ok(resumedAt >= 3 && stored.includes(resumedAt), `resumed after a shown event (${resumedAt})`);
    assert.equal(proxy.streamRequests[0].lastEventId, null, "the first connection replays from the start");
    const shown = await page.locator("#conv-log [data-event-id]").evaluateAll((nodes) => nodes.map((n) => n.dataset.eventId));
    assert.equal(new Set(shown).size, shown.length, "no element for an event twice");
    assert.equal(await page.locator("#conv-log details.tool").count(), 4);
    assert.equal(await page.locator("#conv-log .answer").textContent(), "All four steps done.");
    assert.deepEqual(page.errors, []);
  } finally {
    await page.context().close();
  }
});

test("conversations: interrupt, send a message, pause after the step, resume", async () => {
  await harness.script([
    { text: "This answer comes too late.", delay_ms: 10_000 },
    { text: "Answer to the follow-up." },
    { tool_calls: [{ id: "p1", name: "TodoWrite", arguments: { todos: [] } }], delay_ms: 600 },
    { text: "Resumed and done." },
  ]);
  const created = await api("POST", "/api/conversations", {
    title: "buttons",
    initial_message: { content: "Think slowly" },
  });
  const page = await newPage(browser);
  try {
    await page.goto(`${harness.triage}/#conversations/${created.id}`);
    const badge = page.locator("#conv-badge .badge");
    await page.locator("#conv-badge .badge[data-status='running']").waitFor();
    await page.click("#conv-interrupt");
    await page.locator("#conv-badge .badge[data-status='paused']").waitFor();
    await page.locator("#conv-log .notice", { hasText: "Interrupted" }).waitFor();
    assert.equal(await page.locator("#conv-interrupt").isDisabled(), true);

    await page.fill("#conv-send-text", "Then answer this");
    await page.press("#conv-send-text", "Enter");
    await page.locator("#conv-log .answer", { hasText: "Answer to the follow-up." }).waitFor();
    await page.locator("#conv-badge .badge[data-status='finished']").waitFor();
    assert.equal(await page.locator("#conv-log .msg.user .user-text").nth(1).textContent(), "Then answer this");

    // Pause: the step in flight (a tool call) completes, then the run stops.
    await page.fill("#conv-send-text", "Plan, then answer");
    await page.press("#conv-send-text", "Enter");
    await page.locator("#conv-badge .badge[data-status='running']").waitFor();
    await page.click("#conv-pause");
    await page.locator("#conv-badge .badge[data-status='paused']").waitFor();
    assert.equal((await harness.llmRequests()).length, 3, "no LLM call after the paused step");
    assert.equal(await page.locator("#conv-run").isDisabled(), false);
    await page.click("#conv-run");
    await page.locator("#conv-log .answer", { hasText: "Resumed and done." }).waitFor();
    assert.equal(await badge.getAttribute("data-status"), "finished");
    assertExactlyOnce(await snapshot(page), await storedIds(created.id));
    await page.screenshot({ path: screenshotPath("conversations-buttons") });
    assert.deepEqual(page.errors, []);
  } finally {
    await page.context().close();
  }
});

test("conversations: status filter, title filter and paging", async () => {
  const ids = [];
  for (let i = 0; i < 23; i++) {
    ids.push((await api("POST", "/api/conversations", { title: `paging ${String(i).padStart(2, "0")}` })).id);
  }
  await waitForStatus(ids[0], "idle");
  const page = await newPage(browser);
  try {
    await page.goto(`${harness.triage}/#conversations`);
    await page.selectOption("#conv-status", "idle");
    await page.waitForFunction(() => document.querySelectorAll(".conv-item").length === 20);
    const titles = await page.locator(".conv-item-title").allTextContents();
    assert.equal(titles[0], "paging 22", "most recently updated first");
    assert.equal(await page.locator(".conv-item .badge[data-status='idle']").count(), 20);
    assert.equal(await page.locator("#conv-newer").isDisabled(), true);
    await page.click("#conv-older");
    await page.waitForFunction(() => document.querySelectorAll(".conv-item").length === 3);
    assert.deepEqual(await page.locator(".conv-item-title").allTextContents(), ["paging 02", "paging 01", "paging 00"]);
    assert.equal(await page.locator("#conv-page").textContent(), "Page 2");
    assert.equal(await page.locator("#conv-older").isDisabled(), true);
    await page.click("#conv-newer");
    await page.waitForFunction(() => document.querySelectorAll(".conv-item").length === 20);
    await page.fill("#conv-filter", "paging 1");
    assert.equal(await page.locator(".conv-item").count(), 10);
    await page.fill("#conv-filter", "no such title");
    assert.equal(await page.locator(".conv-item").count(), 0);
    assert.match(await page.locator("#conv-list-message").textContent(), /Nothing on this page matches/);
    await page.selectOption("#conv-status", "stuck");
    await page.locator("#conv-list-message", { hasText: "No conversation has this status." }).waitFor();
    assert.deepEqual(page.errors, []);
  } finally {
    for (const id of ids) await api("DELETE", `/api/conversations/${id}`);
    await page.context().close();
  }
});

test("conversations: hostile titles, messages, model text and tool output stay text", async () => {
  const XSS = "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>";
  await harness.script([
    {
      content: `Look: ${XSS} [click](javascript:window.__pwned=3)`,
      tool_calls: [
        { id: "out", name: "bash", arguments: { command: `echo '${XSS}'` } },
        { id: "ask", name: "bash", arguments: { command: `touch '/tmp/${XSS}'` } },
      ],
    },
    { text: `# ${XSS}\n\n<iframe src="javascript:window.__pwned=4"></iframe>` },
  ]);
  const created = await api("POST", "/api/conversations", {
    // As long as the server takes (500 characters): the page clips it shorter still.
    title: `${XSS} ${"long ".repeat(85)}`,
    tags: { team: XSS.slice(0, 200) },
    initial_message: { content: XSS },
  });
  const page = await newPage(browser, { width: 900, height: 700 });
  try {
    await page.goto(`${harness.triage}/#conversations/${created.id}`);
    const panel = page.locator("#conv-approvals .approval");
    await panel.waitFor();
    assert.match(await panel.locator(".approval-desc").textContent(), /touch '\/tmp\/<img src=x/);
    await panel.locator("button.deny").click();
    await page.locator("#conv-log .answer").waitFor();
    await page.locator("#conv-badge .badge[data-status='finished']").waitFor();
    await panel.waitFor({ state: "detached" });
    const output = page.locator("details.tool[data-tool-call-id='out'] pre.output");
    assert.match(await output.textContent(), /<img src=x onerror/);
    assert.equal(await page.locator("#conv-log .answer h1").textContent(), XSS);
    assert.equal(await page.locator("#conv-log .msg.user .user-text").textContent(), XSS);
    const title = await page.locator("#conv-title").textContent();
    assert.ok(title.startsWith(XSS) && title.length < 400, `title clipped (${title.length})`);
    assert.equal(await page.locator("img, iframe, object, embed, script:not([src])").count(), 0);
    assert.equal(await page.locator("a[href^='javascript']").count(), 0);
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `a long title does not widen the page (${overflow}px)`);
    await page.screenshot({ path: screenshotPath("conversations-hostile") });
    assert.deepEqual(page.errors, []);
  } finally {
    await page.context().close();
  }
});

test("conversations: a server with API keys asks for one, then lists and streams with it", async () => {
  await harness.script([{ text: "Keyed answer." }]);
  const page = await newPage(browser);
  try {
    await page.goto(`${harness.triageKeyed}/#conversations`);
    await page.locator("#key-panel").waitFor();
    await page.locator("#conv-list-message", { hasText: "HTTP 401" }).waitFor();
    await page.fill("#api-key", API_KEY);
    await page.click("#key-form button[type=submit]");
    await page.locator("#conv-list-message", { hasText: "No conversations yet." }).waitFor();
    await page.fill("#conv-new-text", "Hello with a key");
    await page.press("#conv-new-text", "Enter");
    await page.locator("#conv-log .answer", { hasText: "Keyed answer." }).waitFor();
    await page.locator(".conv-item .badge[data-status='finished']").waitFor();
    assert.equal(await page.locator("#conv-live").getAttribute("data-state"), "live");
    assert.deepEqual(page.errors, []);
  } finally {
    await page.context().close();
  }
});
