// A browser client of triage's /api/chat built on @microsoft/fetch-event-source, as the README
// recommends. Bundled by esbuild for fetch-event-source.test.mjs and exposed as window.fesDemo.

import { EventStreamContentType, fetchEventSource } from "@microsoft/fetch-event-source";

// Thrown to stop fetch-event-source from retrying.
class FatalError extends Error {}

// Thrown to make it reconnect (with the last event's id as Last-Event-ID).
class RetriableError extends Error {}

const FRONTEND_TOOLS = [
  {
    name: "show_chart",
    description: "Render a chart in the user's browser. Returns what was drawn.",
    mode: "pause",
    parameters: {
      type: "object",
      properties: { metric: { type: "string" } },
      required: ["metric"],
    },
  },
];

// One streaming request. Resolves when the stream ends; rejects, without retrying, on a
// refused request or a broken stream.
async function stream(url, body, onEvent, stats) {
  await fetchEventSource(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ stream: true, ...body }),
    openWhenHidden: true, // a hidden tab would otherwise abort and re-send the POST
    async onopen(response) {
      const type = response.headers.get("content-type") || "";
      if (response.ok && type.startsWith(EventStreamContentType)) return;
      let detail = response.statusText;
      try {
        detail = JSON.stringify((await response.json()).detail);
      } catch {
        // not JSON
      }
      throw new FatalError(`HTTP ${response.status}: ${detail}`);
    },
    onmessage(message) {
      // `: keep-alive` comments arrive as messages with no event and no data.
      if (!message.data) {
        stats.empty += 1;
        return;
      }
      onEvent(message.event, JSON.parse(message.data));
    },
    onerror(err) {
      throw err; // rethrow: never retry a chat request
    },
  });
}

// Request 1 pauses on the frontend tool; request 2 sends its result and gets the answer.
async function runChat(base) {
  const events = [];
  const stats = { empty: 0 };
  let paused = null;
  await stream(
    `${base}/api/chat`,
    { ask: "Show me CPU", frontend_tools: FRONTEND_TOOLS },
    (name, data) => {
      events.push({ request: 1, name, data });
      if (name === "approval_required") paused = data;
    },
    stats,
  );
  if (!paused) throw new Error("request 1 did not pause");
  const results = paused.pending_frontend_tool_calls.map((call) => ({
    tool_call_id: call.tool_call_id,
    tool_name: call.tool_name,
    result: JSON.stringify({ rendered: true, metric: call.arguments.metric, peak: "93%" }),
  }));
  await stream(
    `${base}/api/chat`,
    {
      ask: "",
      conversation_history: paused.conversation_history,
      frontend_tools: FRONTEND_TOOLS,
      frontend_tool_results: results,
    },
    (name, data) => events.push({ request: 2, name, data }),
    stats,
  );
  return { events, keepAlives: stats.empty };
}

// A request the server refuses (a frontend tool named like a built-in one): HTTP 400.
function badBody() {
  return {
    ask: "x",
    stream: true,
    frontend_tools: [{ name: "bash", description: "clashes with the built-in bash tool" }],
  };
}

// With the handlers above: rejects once, no retry.
async function runBadRequest(base) {
  try {
    await stream(`${base}/api/chat`, badBody(), () => {}, { empty: 0 });
    return { rejected: false };
  } catch (e) {
    return { rejected: true, fatal: e instanceof FatalError, message: e.message };
  }
}

// The library's defaults (no onopen/onerror): it retries the refused POST every second until
// aborted. Runs for `ms`, then aborts.
async function runBadRequestWithDefaults(base, ms) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ms);
  await fetchEventSource(`${base}/api/chat`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(badBody()),
    openWhenHidden: true,
    signal: controller.signal,
    onmessage() {},
  });
  clearTimeout(timer);
}

// Follows a server-side conversation's event stream (a GET, so safe to retry) until it reports
// `until` as its status. Unlike a chat request, a dropped connection is resumed: the library
// sends the last event's id as Last-Event-ID and the server sends exactly what was missed.
// Progress is visible in window.fesConversation while it runs.
async function followConversation(base, id, until = "finished") {
  const progress = { events: [], opens: 0, errors: [] };
  window.fesConversation = progress;
  const controller = new AbortController();
  await fetchEventSource(`${base}/api/conversations/${id}/events/stream`, {
    openWhenHidden: true,
    signal: controller.signal,
    async onopen(response) {
      progress.opens += 1;
      const type = response.headers.get("content-type") || "";
      if (response.ok && type.startsWith(EventStreamContentType)) return;
      if (response.status >= 500) throw new RetriableError(`HTTP ${response.status}`);
      throw new FatalError(`HTTP ${response.status}`);
    },
    onmessage(message) {
      if (!message.data) return; // keep-alive comments
      const data = JSON.parse(message.data);
      progress.events.push({ id: Number(message.id), name: message.event, data });
      if (message.event === "conversation_state_update" && data.execution_status === until) {
        controller.abort(); // resolves fetchEventSource
      }
    },
    onclose() {
      throw new RetriableError("the server ended the stream"); // reconnect
    },
    onerror(err) {
      if (err instanceof FatalError) throw err;
      progress.errors.push(String(err && err.message));
      if (progress.errors.length > 20) throw new FatalError(`gave up: ${progress.errors.join(" | ")}`);
      return 250; // ms before reconnecting
    },
  });
  return progress;
}

window.fesDemo = { runChat, runBadRequest, runBadRequestWithDefaults, followConversation };
