// The console at `/` in a real browser, against triage and a scripted fake LLM.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { launchBrowser, newPage, screenshotPath, startHarness } from "./harness.mjs";

const API_KEY = `browser-key-${randomBytes(6).toString("hex")}`;
let harness;
let browser;

before(async () => {
  [harness, browser] = await Promise.all([startHarness({ apiKey: API_KEY }), launchBrowser()]);
});

after(async () => {
  await browser?.close();
  harness?.stop();
});

async function openConsole(base = harness.triage) {
  const page = await newPage(browser);
  await page.goto(`${base}/`);
  return page;
}

async function ask(page, question) {
  await page.fill("#ask", question);
  await page.press("#ask", "Enter");
}

function assertNoPageErrors(page) {
  assert.deepEqual(page.errors, [], "no script errors in the page");
}

const TODOS = {
  todos: [
    { id: "1", content: "Check pod logs", status: "in_progress" },
    { id: "2", content: "Check events", status: "pending" },
  ],
};

const ANSWER = [
  "## Root cause",
  "",
  "The pod **web-1** is in `CrashLoopBackOff`: its *liveness probe* fails.",
  "",
  "1. Check the probe path",
  "2. Roll back the [deployment docs](https://kubernetes.io/docs/concepts/workloads/controllers/deployment/)",
  "",
  "- a [bad link](javascript:alert(1))",
  "- raw html <img src=x onerror=\"window.__pwned=1\"> stays text",
  "",
  "```bash",
  "kubectl rollout undo deploy/web <b>",
  "```",
].join("\n");

test("ask: the answer renders as markdown, with the tool card, usage and a follow-up", async () => {
  await harness.script([
    {
      content: "Let me plan the investigation.",
      tool_calls: [{ id: "todo1", name: "TodoWrite", arguments: TODOS }],
      chunk_delay_ms: 40,
    },
    { text: ANSWER, chunk_delay_ms: 10 },
    { text: "It was the **probe** again." },
  ]);
  const page = await openConsole();
  await page.waitForSelector("#model option[value='fake-alt']", { state: "attached" });
  assert.equal(await page.locator("#model option").first().textContent(), "Server default (fake)");
  await page.selectOption("#model", "fake-alt");
  await ask(page, "Why is web-1 crashing?");

  const answer = page.locator(".turn .answer");
  await answer.waitFor();
  assert.equal(await answer.locator("h2").textContent(), "Root cause");
  assert.equal(await answer.locator("strong").first().textContent(), "web-1");
  assert.equal(await answer.locator("p code").textContent(), "CrashLoopBackOff");
  assert.equal(await answer.locator("em").textContent(), "liveness probe");
  assert.equal(await answer.locator("ol > li").count(), 2);
  const link = answer.locator("a");
  assert.equal(await link.count(), 1, "only the http(s) link becomes a link");
  assert.equal(
    await link.getAttribute("href"),
    "https://kubernetes.io/docs/concepts/workloads/controllers/deployment/",
  );
  assert.equal(await link.getAttribute("rel"), "noopener noreferrer");
  assert.equal(await answer.locator("ul > li").first().textContent(), "a bad link");
  assert.equal(await answer.locator("img").count(), 0, "model HTML is never markup");
  assert.match(await answer.textContent(), /raw html <img src=x onerror="window.__pwned=1"> stays text/);
  assert.equal(await answer.locator("pre.code code").textContent(), "kubectl rollout undo deploy/web <b>");
  assert.equal(await answer.locator("pre.code code").getAttribute("data-lang"), "bash");
  assert.equal(await page.evaluate(() => window.__pwned), undefined);

  // The ai_message before the tool call, and the tool card with parameters, status and output.
  assert.equal(await page.locator(".turn .ai-message").textContent(), "Let me plan the investigation.");
  const card = page.locator("details.tool[data-tool-call-id='todo1']");
  assert.equal(await card.locator(".tool-name").textContent(), "TodoWrite");
  assert.equal(await card.locator(".status").getAttribute("data-status"), "success");
  assert.equal(await card.locator(".tool-desc").textContent(), "Update investigation tasks");
  await page.screenshot({ path: screenshotPath("console-answer") });
  await card.locator("summary").click();
  assert.match(await card.locator("pre.params").textContent(), /"content": "Check pod logs"/);
  assert.match(await card.locator("pre.output").textContent(), /\[~\] 1\. Check pod logs/);
  assert.match(await page.locator("#usage").textContent(), /^Context [\d,]+ \/ 200,000 \(\d+%\) · last call [\d,]+ in \/ [\d,]+ out$/);

  // Follow-ups whose toolset is not enabled here (kubernetes, prometheus) are not offered.
  assert.deepEqual(await page.locator(".turn .follow-ups button").allTextContents(), ["Articles"]);

  // The chosen model was used.
  const first = await harness.llmRequests();
  assert.equal(first[0].model, "fake-model-alt");

  // A follow-up continues the conversation.
  await ask(page, "And now?");
  await page.locator(".turn").nth(1).locator(".answer").waitFor();
  assert.equal(await page.locator(".turn").nth(1).locator(".answer strong").textContent(), "probe");
  const sent = (await harness.llmRequests())[2].messages;
  const users = sent.filter((m) => m.role === "user").map((m) => JSON.stringify(m.content));
  assert.equal(users.length, 2);
  assert.match(users[0], /Why is web-1 crashing\?/);
  assert.match(users[1], /And now\?/);
  assert.ok(
    sent.some((m) => m.role === "assistant" && String(m.content).includes("## Root cause")),
    "the first answer is in the follow-up's history",
  );
  assertNoPageErrors(page);
  await page.context().close();
});

test("no model: the console says so before anyone types, and shows the README section", async () => {
  const page = await openConsole(harness.triageBare);
  const notice = page.locator("#setup-notice");
  await notice.waitFor();
  assert.match(await notice.textContent(), /No LLM model is configured/);
  await notice.locator("a", { hasText: "README" }).click();
  await notice.locator(".readme h2").waitFor();
  assert.equal(await notice.locator(".readme h2").first().textContent(), "Pointing triage at an LLM");
  assertNoPageErrors(page);
  await page.context().close();
});

test("approve: a bash call waits for Approve, then runs and the stream finishes", async () => {
  const marker = `/tmp/triage-browser-${randomBytes(6).toString("hex")}`;
  rmSync(marker, { force: true });
  await harness.script([
    { tool_calls: [{ id: "risky", name: "bash", arguments: { command: `touch ${marker}` } }] },
    { text: `Created \`${marker}\`.` },
  ]);
  const page = await openConsole();
  try {
    await ask(page, "Create the marker file");
    const panel = page.locator(".approval");
    await panel.waitFor();
    assert.equal(await panel.locator(".approval-desc").textContent(), `touch ${marker}`);
    assert.equal(
      await page.locator("details.tool[data-tool-call-id='risky'] .status").getAttribute("data-status"),
      "approval_required",
    );
    assert.equal(existsSync(marker), false, "nothing ran before approval");
    assert.equal(await page.locator("#ask").isDisabled(), true, "the conversation waits for a decision");
    await page.screenshot({ path: screenshotPath("console-approval-pending") });

    await panel.locator("button.approve").click();
    const answer = page.locator(".answer");
    await answer.waitFor();
    assert.equal(await answer.locator("code").textContent(), marker);
    assert.equal(existsSync(marker), true, "the approved command ran");
    assert.equal(await panel.locator(".decision").textContent(), "Approved");
    assert.equal(
      await page.locator("details.tool[data-tool-call-id='risky'] .status").getAttribute("data-status"),
      "no_data", // touch prints nothing
    );
    // The resume request: empty ask, the paused history, the decision, approvals on.
    const second = (await harness.llmRequests())[1].messages;
    assert.ok(second.some((m) => m.role === "tool" && m.tool_call_id === "risky"));
    await page.screenshot({ path: screenshotPath("console-approved") });
    assertNoPageErrors(page);
  } finally {
    rmSync(marker, { force: true });
    await page.context().close();
  }
});

test("deny: feedback reaches the model and nothing runs", async () => {
  const marker = `/tmp/triage-browser-${randomBytes(6).toString("hex")}`;
  await harness.script([
    { tool_calls: [{ id: "risky", name: "bash", arguments: { command: `touch ${marker}` } }] },
    { text: "Understood, I left it alone." },
  ]);
  const page = await openConsole();
  await ask(page, "Create the marker file");
  const panel = page.locator(".approval");
  await panel.waitFor();
  await panel.locator("input.feedback").fill("not on this host");
  await panel.locator("button.deny").click();
  await page.locator(".answer").waitFor();
  assert.equal(await panel.locator(".decision").textContent(), "Denied: not on this host");
  assert.equal(existsSync(marker), false);
  const second = (await harness.llmRequests())[1].messages;
  const tool = second.find((m) => m.role === "tool" && m.tool_call_id === "risky");
  assert.match(String(tool.content), /not on this host/);
  assertNoPageErrors(page);
  await page.context().close();
});

test("show_table pauses, renders a table, sends its result; highlight marks text", async () => {
  const table = {
    title: "Pods in default",
    columns: ["Pod", "Status", "Restarts"],
    rows: [
      ["web-1", "CrashLoopBackOff", "12"],
      ["web-2", "Running", "0"],
      ["db-0", "Running", "1"],
    ],
  };
  await harness.script([
    {
      content: "Here are the pods.",
      tool_calls: [{ id: "tbl", name: "show_table", arguments: table }],
      delay_ms: 500, // the server sends `: keep-alive` comments meanwhile
    },
    { tool_calls: [{ id: "hl", name: "highlight", arguments: { text: "CrashLoopBackOff" } }] },
    { text: "Only **web-1** is unhealthy: it restarted 12 times." },
  ]);
  const page = await openConsole();
  await ask(page, "Show me the pods");
  const rendered = page.locator(".frontend-table");
  await rendered.waitFor();
  assert.equal(await rendered.locator("figcaption").textContent(), "Pods in default");
  assert.deepEqual(await rendered.locator("th").allTextContents(), ["Pod", "Status", "Restarts"]);
  assert.equal(await rendered.locator("tbody tr").count(), 3);
  await page.locator(".answer").waitFor();
  assert.equal(await page.locator(".answer strong").textContent(), "web-1");

  // Request 2 carried the page's result for the paused call.
  const requests = await harness.llmRequests();
  assert.equal(requests.length, 3);
  const result = requests[1].messages.find((m) => m.role === "tool" && m.tool_call_id === "tbl");
  assert.equal(
    result.content,
    'Rendered a table titled "Pods in default" in the user\'s console with 3 row(s) and 3 column(s): Pod, Status, Restarts.',
  );
  // Both browser tools were offered to the model.
  const offered = requests[0].tools.map((t) => t.function.name);
  assert.ok(offered.includes("show_table") && offered.includes("highlight"), offered.join(","));

  // The noop highlight marked the cell.
  const mark = page.locator(".frontend-table mark.hl");
  assert.equal(await mark.textContent(), "CrashLoopBackOff");
  assert.equal(
    await page.locator("details.tool[data-tool-call-id='tbl'] .status").getAttribute("data-status"),
    "success",
  );
  await page.screenshot({ path: screenshotPath("console-show-table") });
  assertNoPageErrors(page);
  await page.context().close();
});

test("errors: an error event and an HTTP error show their text", async () => {
  await harness.script([{ error: 400, message: "fake provider says no" }]);
  const page = await openConsole();
  await ask(page, "This will fail");
  const error = page.locator(".notice-error");
  await error.waitFor();
  assert.match(await error.textContent(), /fake provider says no/);
  assert.equal(await page.locator("#send").isDisabled(), false, "the console is usable again");

  // An HTTP error with its detail: an unknown model, chosen behind the page's back.
  await page.evaluate(() => {
    const select = document.getElementById("model");
    select.append(new Option("no-such-model", "no-such-model", true, true));
  });
  await ask(page, "Which model?");
  const httpError = page.locator(".turn").nth(1).locator(".notice-error");
  await httpError.waitFor();
  assert.match(await httpError.textContent(), /^Error: HTTP 4\d\d: .*no-such-model/);
  await page.screenshot({ path: screenshotPath("console-errors") });
  await page.context().close();
});

test("API key: a 401 shows the key field; the key is kept in sessionStorage and sent", async () => {
  await harness.script([{ text: "Authenticated answer." }]);
  const page = await openConsole(harness.triageKeyed);
  const panel = page.locator("#key-panel");
  await panel.waitFor();
  assert.equal(await page.locator("#model option").count(), 1, "no models without a key");

  await page.fill("#api-key", "wrong-key");
  await page.click("#key-form button[type=submit]");
  await panel.waitFor();
  assert.match(await page.locator("#key-message").textContent(), /refused/);

  await page.fill("#api-key", API_KEY);
  await page.click("#key-form button[type=submit]");
  await page.waitForSelector("#model option[value='fake']", { state: "attached" });
  assert.equal(await panel.isHidden(), true);
  assert.equal(await page.evaluate(() => sessionStorage.getItem("triage.apiKey")), API_KEY);
  await ask(page, "Hello?");
  await page.locator(".answer").waitFor();
  assert.equal(await page.locator(".answer").textContent(), "Authenticated answer.");
  assertNoPageErrors(page);
  await page.context().close();
});

test("compaction: the start and compacted notices appear, then the answer", async () => {
  const words = Array.from({ length: 3000 }, (_, i) => ["pod", "node", "disk", "memory", "error"][i % 5]).join(" ");
  await harness.script([
    { text: `Long answer: ${words}` },
    { text: "<analysis>chronology</analysis>\n<summary>SUMMARY-MARKER</summary>" },
    { text: "Short answer after compaction." },
  ]);
  const page = await openConsole();
  await page.waitForSelector("#model option[value='fake-small']", { state: "attached" });
  await page.selectOption("#model", "fake-small");
  await ask(page, "Tell me everything");
  await page.locator(".turn .answer").waitFor();
  await ask(page, "And in short?");
  const second = page.locator(".turn").nth(1);
  await second.locator(".answer").waitFor();
  const notices = await second.locator(".notice-compaction").allTextContents();
  assert.equal(notices.length, 2, notices.join(" | "));
  assert.match(notices[0], /^Compacting conversation history \(\d+ tokens, \d+ messages\)/);
  assert.match(notices[1], /^The conversation history has been compacted from \d+ to \d+ tokens/);
  assert.match(await second.locator(".compaction-summary").textContent(), /SUMMARY-MARKER/);
  assert.equal(await second.locator(".answer").textContent(), "Short answer after compaction.");
  await page.screenshot({ path: screenshotPath("console-compaction") });
  assertNoPageErrors(page);
  await page.context().close();
});

test("typing: the answer's text shows while the model writes it, then the rendered answer replaces it", async () => {
  await harness.script([{ text: "Checking **the** pods one by one, then the events.", chunk_delay_ms: 250 }]);
  const page = await openConsole();
  await ask(page, "What is wrong?");
  const turn = page.locator(".turn").first();
  // Mid-answer: the draft holds the first words, and no answer has been rendered yet.
  await page.waitForFunction(() => /Checking \*\*the\*\*/.test(document.querySelector(".turn .draft")?.textContent || ""));
  assert.equal(await turn.locator(".answer").count(), 0, "the answer is still being written");
  await turn.locator(".answer").waitFor();
  assert.equal(await turn.locator(".draft").count(), 0, "the draft gives way to the answer");
  assert.equal(await turn.locator(".answer strong").textContent(), "the");
  assert.equal(await turn.locator(".answer").textContent(), "Checking the pods one by one, then the events.");
  assertNoPageErrors(page);
  await page.context().close();
});

test("markdown renderer: model text never becomes markup or script", async () => {
  const page = await openConsole();
  const vectors = [
    "<script>window.__pwned = 1</script>",
    "<img src=x onerror=\"window.__pwned = 1\">",
    "[click](javascript:window.__pwned=1)",
    "[click](https://ok.example/\" onmouseover=\"window.__pwned=1)",
    "[click](data:text/html,<script>window.__pwned=1</script>)",
    "`<b>code</b>` and **<i>bold</i>** and _<u>x</u>_",
    "https://auto.example/a?b=1&c=<script>",
    "```html\n<iframe src=javascript:1></iframe>\n```",
    "# <svg onload=window.__pwned=1>",
    "| a | <b>b</b> |\n|---|---|\n| <img src=x> | [l](https://t.example) |",
    "> <style>body{display:none}</style>",
    "- item <a href=javascript:1>x</a>\n  - nested <object data=x>",
  ];
  const results = await page.evaluate((inputs) => {
    const allowed = new Set([
      "P", "BR", "STRONG", "EM", "DEL", "CODE", "PRE", "A", "UL", "OL", "LI", "BLOCKQUOTE", "HR",
      "H1", "H2", "H3", "H4", "H5", "H6", "DIV", "TABLE", "THEAD", "TBODY", "TR", "TH", "TD",
    ]);
    const attrs = new Set(["href", "target", "rel", "data-lang", "start", "class"]);
    return inputs.map((md) => {
      const div = document.createElement("div");
      div.innerHTML = window.triageConsole.renderMarkdown(md);
      const bad = [];
      for (const node of div.querySelectorAll("*")) {
        if (!allowed.has(node.tagName)) bad.push(`tag ${node.tagName}`);
        for (const a of node.attributes) if (!attrs.has(a.name)) bad.push(`attr ${a.name}`);
        if (node.tagName === "A" && !/^https?:\/\//.test(node.getAttribute("href"))) bad.push("href");
      }
      return { md, bad, text: div.textContent };
    });
  }, vectors);
  for (const r of results) assert.deepEqual(r.bad, [], `${r.md} rendered unsafe markup`);
  assert.match(results[0].text, /<script>window.__pwned = 1<\/script>/, "shown as text");
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await page.context().close();
});
