// triage console: the event log of one server-side conversation, shared helpers for the
// conversations view (conversations.js), and its event stream: the history replayed from the
// store, then live, resumed with Last-Event-ID after a drop (as fetch-event-source does), so
// each event is shown exactly once.
//
// Everything a server, a model or another user wrote is set as text (textContent), or as the
// chat view's markdown, which escapes all HTML first. Nothing untrusted goes to innerHTML.
"use strict";

window.triageConversationLog = (() => {
  const KEY_STORAGE = "triage.apiKey"; // shared with the chat view
  const MAX_OUTPUT_CHARS = 20000;
  // Markdown is rendered from at most this much text (a huge answer would freeze the tab).
  const MARKDOWN_MAX_CHARS = 100000;
  // A frame longer than this (a server that never ends one) breaks the connection.
  const FRAME_MAX_CHARS = 16 * 1024 * 1024;
  const RETRY_FIRST_MS = 250;
  const RETRY_MAX_MS = 5000;
  // A connection that lasted this long or brought an event was good: the backoff starts over.
  // One a server ends at once counts as a failure, so it is not asked again without pause.
  const HEALTHY_AFTER_MS = 5000;
  const STATUS_LABELS = {
    idle: "idle",
    running: "running",
    paused: "paused",
    waiting_for_confirmation: "waiting for approval",
    finished: "finished",
    error: "error",
    stuck: "stuck",
    deleting: "deleting",
  };
  const TOOL_STATUS_LABELS = {
    running: "running",
    success: "success",
    error: "error",
    no_data: "no data",
    approval_required: "approval required",
  };

  // ---------------------------------------------------------------- helpers

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function str(v) {
    return typeof v === "string" ? v : "";
  }

  function clip(text, max = MAX_OUTPUT_CHARS) {
    const s = String(text ?? "");
    if (s.length <= max) return s;
    return `${s.slice(0, max)}… (${s.length - max} more characters not shown)`;
  }

  function pretty(value) {
    if (typeof value === "string") return value;
    try {
      return JSON.stringify(value, null, 2);
    } catch {
      return String(value);
    }
  }

  function markdown(className, source) {
    const div = el("div", `markdown ${className}`);
    const text = clip(source, MARKDOWN_MAX_CHARS);
    const render = window.triageConsole && window.triageConsole.renderMarkdown;
    if (render) div.innerHTML = render(text); // renderMarkdown escapes all HTML first
    else div.textContent = text;
    return div;
  }

  function apiKey() {
    try {
      return sessionStorage.getItem(KEY_STORAGE) || "";
    } catch {
      return "";
    }
  }

  function headers(extra) {
    const h = Object.assign({}, extra);
    const key = apiKey();
    if (key) h["X-API-Key"] = key;
    return h;
  }

  function sleep(ms, signal) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      if (signal) signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
    });
  }

  async function detailOf(response) {
    const text = await response.text().catch(() => "");
    try {
      const body = JSON.parse(text);
      const detail = body && typeof body === "object" && "detail" in body ? body.detail : body;
      return clip(typeof detail === "string" ? detail : pretty(detail), 2000);
    } catch {
      return clip(text.trim() || response.statusText || "no details", 2000);
    }
  }

  function statusBadge(status) {
    const badge = el("span", "badge", STATUS_LABELS[status] || str(status) || "?");
    badge.dataset.status = str(status);
    return badge;
  }

  // ---------------------------------------------------------------- the event stream

  // Reads SSE frames (id, event, data) from a fetch() body. Comments (`: keep-alive`) and
  // frames without data are skipped; a frame cut off by the end of the body is dropped.
  async function readFrames(body, onFrame) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let frame = { id: "", event: "", data: [] };
    const line = (l) => {
      if (l === "") {
        if (frame.data.length) onFrame({ id: frame.id, event: frame.event || "message", data: frame.data.join("\n") });
        frame = { id: "", event: "", data: [] };
        return;
      }
      if (l.startsWith(":")) return;
      const colon = l.indexOf(":");
      const field = colon < 0 ? l : l.slice(0, colon);
      let value = colon < 0 ? "" : l.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") frame.event = value;
      else if (field === "data") frame.data.push(value);
      else if (field === "id") frame.id = value;
    };
    let open = 0; // characters since the last frame ended
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      const lines = buffer.split(/\r\n|\n|\r(?!$)/);
      buffer = lines.pop();
      for (const l of lines) {
        open = l === "" ? 0 : open + l.length;
        line(l);
      }
      if (open + buffer.length > FRAME_MAX_CHARS) {
        await reader.cancel();
        throw new Error("an event larger than the console reads");
      }
    }
  }

  // Follows a conversation's stream into `log` until `signal` aborts: from after the log's
  // last event (0: the whole history, from the store), then live; after a drop, from the last
  // event shown. `hooks.live(state, text, why)` tells how the connection stands;
  // `hooks.refused(status, detail)` a refusal that retrying cannot change (it ends the follow).
  async function follow(id, signal, log, hooks) {
    let delay = RETRY_FIRST_MS;
    while (!signal.aborted) {
      const h = headers({ Accept: "text/event-stream" });
      if (log.lastId > 0) h["Last-Event-ID"] = String(log.lastId);
      let response = null;
      let why = "";
      try {
        response = await fetch(`/api/conversations/${id}/events/stream`, { headers: h, signal, cache: "no-store" });
      } catch (e) {
        why = e.message;
      }
      if (signal.aborted) return;
      if (response && !response.ok) {
        const detail = await detailOf(response);
        if (response.status < 500) {
          hooks.refused(response.status, detail);
          return;
        }
        why = `HTTP ${response.status}: ${detail}`;
      } else if (response) {
        hooks.live("live", "Live", "");
        const opened = Date.now();
        const before = log.lastId;
        try {
          await readFrames(response.body, (frame) => {
            if (!signal.aborted) log.take(frame);
          });
          why = "the server ended the stream";
        } catch (e) {
          why = e.message;
        }
        if (signal.aborted) return;
        if (log.lastId > before || Date.now() - opened >= HEALTHY_AFTER_MS) delay = RETRY_FIRST_MS;
      }
      hooks.live("reconnecting", "Reconnecting…", clip(why, 500));
      await sleep(delay, signal);
      delay = Math.min(delay * 2, RETRY_MAX_MS);
    }
  }

  // ---------------------------------------------------------------- the log

  // The events of one conversation shown in `container`, each once, in order.
  // `onStatus(status, reason)` hears each conversation_state_update.
  class EventLog {
    constructor(container, onStatus) {
      this.container = container;
      this.onStatus = onStatus;
      this.lastId = 0; // the last event shown
      this.received = []; // the id of every frame read off the wire, duplicates included
      this.applied = []; // the ids of the events shown, in order
      this.cards = new Map();
    }

    take(frame) {
      const id = Number(frame.id);
      if (!Number.isSafeInteger(id) || id <= 0) return;
      this.received.push(id);
      if (id <= this.lastId) return; // shown already: never twice
      this.lastId = id;
      let payload;
      try {
        payload = JSON.parse(frame.data);
      } catch {
        payload = null;
      }
      this.applied.push(id);
      if (payload && typeof payload === "object") this.render(id, frame.event, payload);
    }

    nearBottom() {
      const l = this.container;
      return l.scrollHeight - l.scrollTop - l.clientHeight < 120;
    }

    add(id, node) {
      const stick = this.nearBottom();
      node.dataset.eventId = String(id);
      this.container.append(node);
      if (stick) this.container.scrollTop = this.container.scrollHeight;
      return node;
    }

    notice(kind, text, id) {
      const node = el("div", `notice notice-${kind}`, text);
      if (kind === "error") node.setAttribute("role", "alert");
      if (id === undefined) {
        this.container.append(node);
        return node;
      }
      return this.add(id, node);
    }

    card(id, callId, name) {
      let c = this.cards.get(callId);
      if (c) return c;
      const details = el("details", "tool");
      details.dataset.toolCallId = callId;
      const summary = el("summary");
      const title = el("span", "tool-name", name || "tool");
      const desc = el("span", "tool-desc");
      const status = el("span", "status");
      summary.append(title, desc, status);
      const body = el("div", "tool-body");
      details.append(summary, body);
      c = { details, title, desc, status, body };
      this.cards.set(callId, c);
      this.setToolStatus(c, "running");
      this.add(id, details);
      return c;
    }

    setToolStatus(c, status) {
      c.status.dataset.status = status;
      c.status.textContent = TOOL_STATUS_LABELS[status] || status;
    }

    toolResult(id, p) {
      const name = str(p.name) || str(p.tool_name) || "tool";
      const c = this.card(id, str(p.tool_call_id), name);
      const r = p.result && typeof p.result === "object" ? p.result : {};
      c.title.textContent = name;
      c.desc.textContent = clip(str(p.description), 500);
      this.setToolStatus(c, str(r.status) || "success");
      c.body.replaceChildren();
      const section = (label, text, cls) => {
        c.body.append(el("div", "tool-label", label), el("pre", cls, clip(text)));
      };
      if (r.params !== undefined && r.params !== null) section("Parameters", pretty(r.params), "params");
      if (r.invocation) section("Invocation", pretty(r.invocation), "invocation");
      if (r.error) section("Error", pretty(r.error), "tool-error");
      if (r.data !== undefined && r.data !== null && r.data !== "") section("Output", pretty(r.data), "output");
    }

    render(id, name, p) {
      switch (name) {
        case "user_message": {
          const node = el("div", "msg user");
          node.append(el("div", "who", "You"), el("div", "user-text", clip(str(p.content))));
          if (Number(p.images) > 0) node.append(el("div", "hint", `${Number(p.images)} image(s)`));
          this.add(id, node);
          break;
        }
        case "ai_message": {
          const content = str(p.content).trim();
          const reasoning = str(p.reasoning).trim();
          if (!content && !reasoning) break;
          const node = el("div", "msg assistant");
          node.append(el("div", "who", "triage"));
          if (reasoning) {
            const d = el("details", "reasoning");
            d.append(el("summary", "", "Reasoning"), el("div", "reasoning-text", clip(reasoning)));
            node.append(d);
          }
          if (content) node.append(markdown("ai-message", content));
          this.add(id, node);
          break;
        }
        case "start_tool_calling":
          this.card(id, str(p.id), str(p.tool_name));
          break;
        case "tool_calling_result":
          this.toolResult(id, p);
          break;
        case "approval_required": {
          const calls = [...(p.pending_approvals || []), ...(p.pending_frontend_tool_calls || [])];
          const names = calls.map((c) => `${str(c.tool_name)}${c.description ? `: ${str(c.description)}` : ""}`);
          this.notice("warn", clip(`Waiting for approval — ${names.join("; ") || "a tool call"}`, 2000), id);
          break;
        }
        case "ai_answer_end": {
          const node = el("div", "msg assistant");
          node.append(el("div", "who", "triage"), markdown("answer", str(p.analysis)));
          this.add(id, node);
          break;
        }
        case "conversation_state_update": {
          const line = el("div", "conv-state");
          line.append(statusBadge(p.execution_status));
          if (p.reason) line.append(el("span", "hint", clip(str(p.reason), 2000)));
          this.add(id, line);
          this.onStatus(str(p.execution_status), p.reason);
          break;
        }
        case "error":
          this.notice("error", clip(`Error: ${str(p.description) || str(p.msg) || "unknown error"}`), id);
          break;
        case "interrupted": {
          const cut = Array.isArray(p.cut_tool_calls) ? p.cut_tool_calls.length : 0;
          this.notice("info", `Interrupted${cut ? `: ${cut} tool call(s) cut` : ""}.`, id);
          break;
        }
        case "paused":
          this.notice("info", "Paused after the step.", id);
          break;
        case "stuck":
          this.notice("error", clip(`Stuck: ${str(p.pattern)}`, 2000), id);
          break;
        case "conversation_history_compaction_start":
        case "conversation_history_compacted":
          this.notice("compaction", clip(str(p.content) || "Compacting the conversation history…", 2000), id);
          break;
        default:
          break; // stored messages, token counts, and kinds this console does not know
      }
    }
  }

  return { el, str, clip, pretty, headers, apiKey, detailOf, statusBadge, EventLog, follow };
})();
