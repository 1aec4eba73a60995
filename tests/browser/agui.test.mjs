// The AG-UI door with the real client: @ag-ui/client's HttpAgent runs against triage (a scripted
// fake LLM behind it) and rebuilds the conversation from the events itself; every stream also
// goes through the client's own verifyEvents. Text, a backend tool, an approval interrupt
// resumed approved and cancelled, a frontend tool round trip, and an LLM failure.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { HttpAgent, verifyEvents } from "@ag-ui/client";
import { from, lastValueFrom, toArray } from "rxjs";
import { startHarness } from "./harness.mjs";

let harness;

before(async () => {
  harness = await startHarness();
});

after(() => harness?.stop());

function agent(messages = []) {
  return new HttpAgent({
    url: `${harness.triage}/api/agui/chat`,
    threadId: `thread-${randomBytes(4).toString("hex")}`,
    initialMessages: messages,
    initialState: { page: "pods" },
  });
}

function user(content) {
  return { id: randomBytes(6).toString("hex"), role: "user", content };
}

// One run through the client; its events, checked again by the client's verifier on their own.
async function run(a, params = {}) {
  const events = [];
  let failure;
  try {
    await a.runAgent(params, { onEvent: ({ event }) => void events.push(event) });
  } catch (e) {
    failure = e;
  }
  await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
  return { events, failure, types: events.map((e) => e.type) };
}

test("text: streamed deltas become the client's assistant message; state round-trips", async () => {
  await harness.script([{ text: "The pod is OOMKilled: raise its memory limit." }]);
  const a = agent([user("why does my pod restart?")]);
  const { events, failure, types } = await run(a);
  assert.equal(failure, undefined);
  assert.equal(types[0], "RUN_STARTED");
  assert.deepEqual(events[1], { type: "STATE_SNAPSHOT", snapshot: { page: "pods" } });
  assert.ok(types.filter((t) => t === "TEXT_MESSAGE_CONTENT").length >= 2, types.join());
  const last = events.at(-1);
  assert.equal(last.type, "RUN_FINISHED");
  assert.equal(last.usage[0].model, "fake");
  const answer = a.messages.at(-1);
  assert.equal(answer.role, "assistant");
  assert.equal(answer.content, "The pod is OOMKilled: raise its memory limit.");
  assert.deepEqual(a.state, { page: "pods" });
});

test("backend tool: call and result land in the client's messages, then the answer", async () => {
  await harness.script([
    { tool_calls: [{ id: "c1", name: "bash", arguments: { command: "echo agui-hello" } }] },
    { text: "It said hello." },
  ]);
  const a = agent([user("say hello")]);
  const { failure, types } = await run(a);
  assert.equal(failure, undefined);
  for (const t of ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"]) assert.ok(types.includes(t), t);
  const roles = a.messages.map((m) => m.role);
  assert.deepEqual(roles, ["user", "assistant", "tool", "assistant"]);
  assert.equal(a.messages[1].toolCalls[0].function.name, "bash");
  assert.match(a.messages[2].content, /agui-hello/);
});

async function interrupted(marker) {
  await harness.script([{ tool_calls: [{ id: "risky", name: "bash", arguments: { command: `touch ${marker}` } }] }]);
  const a = agent([user("fix it")]);
  const { events, failure } = await run(a);
  assert.equal(failure, undefined);
  const outcome = events.at(-1).outcome;
  assert.equal(outcome.type, "interrupt");
  assert.equal(outcome.interrupts[0].toolCallId, "risky");
  assert.equal(outcome.interrupts[0].metadata.command, `touch ${marker}`);
  assert.equal(a.pendingInterrupts.length, 1);
  assert.equal(existsSync(marker), false, "nothing ran before approval");
  return a;
}

test("approval: an interrupt, resumed resolved, runs the command", async () => {
  const marker = `/tmp/triage-agui-${randomBytes(6).toString("hex")}`;
  rmSync(marker, { force: true });
  const a = await interrupted(marker);
  await harness.script([{ text: "Done." }]);
  const { events, failure, types } = await run(a, {
    resume: [{ interruptId: a.pendingInterrupts[0].id, status: "resolved" }],
  });
  assert.equal(failure, undefined, String(failure));
  assert.ok(types.includes("TOOL_CALL_RESULT"));
  assert.equal(events.at(-1).outcome?.type ?? "success", "success");
  assert.equal(existsSync(marker), true, "the approved command ran");
  assert.equal(a.pendingInterrupts.length, 0);
  rmSync(marker, { force: true });
});

test("approval: cancelled denies; the client refuses to run with the interrupt unanswered", async () => {
  const marker = `/tmp/triage-agui-${randomBytes(6).toString("hex")}`;
  rmSync(marker, { force: true });
  const a = await interrupted(marker);
  await assert.rejects(a.runAgent({}), /pending interrupt/);
  await harness.script([{ text: "Understood." }]);
  const { failure } = await run(a, { resume: [{ interruptId: a.pendingInterrupts[0].id, status: "cancelled" }] });
  assert.equal(failure, undefined, String(failure));
  const result = a.messages.find((m) => m.role === "tool" && m.toolCallId === "risky");
  assert.match(result.content, /denied/);
  assert.equal(existsSync(marker), false);
});

test("frontend tool: the run ends on the client's tool, its result continues it", async () => {
  const tools = [{ name: "show_chart", description: "Render a chart", parameters: { type: "object", properties: { metric: { type: "string" } } } }];
  await harness.script([{ tool_calls: [{ id: "fe1", name: "show_chart", arguments: { metric: "cpu" } }] }]);
  const a = agent([user("show me CPU")]);
  const first = await run(a, { tools });
  assert.equal(first.failure, undefined);
  assert.deepEqual(first.events.at(-1).outcome, { type: "success", pendingToolCallIds: ["fe1"] });
  a.addMessage({ id: "r1", role: "tool", toolCallId: "fe1", content: "rendered: peak 93%" });
  await harness.script([{ text: "CPU peaked at 93%." }]);
  const second = await run(a, { tools });
  assert.equal(second.failure, undefined);
  assert.equal(a.messages.at(-1).content, "CPU peaked at 93%.");
  const requests = await harness.llmRequests();
  const sent = JSON.stringify(requests.at(-1).messages);
  assert.match(sent, /rendered: peak 93%/);
});

test("an LLM failure ends the stream with RUN_ERROR", async () => {
  await harness.script([{ error: 400, message: "bad request from the provider" }]);
  const a = agent([user("why?")]);
  const { events, types } = await run(a);
  assert.equal(events.at(-1).type, "RUN_ERROR");
  assert.match(events.at(-1).message, /bad request/);
  assert.equal(types.filter((t) => t === "RUN_ERROR").length, 1);
  assert.ok(!types.includes("RUN_FINISHED"));
});
