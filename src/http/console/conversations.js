// triage console, conversations view: the conversations that live on the server
// (/api/conversations). A list with status badges, a status filter and paging; one
// conversation's events replayed from the store and then followed live over its event stream,
// resumed with Last-Event-ID when the connection drops (as fetch-event-source does), so each
// event is shown exactly once; pause, interrupt, resume, approvals and a message box.
//
// Everything a server, a model or another user wrote is set as text (textContent), or as the
// chat view's markdown, which escapes all HTML first. Nothing untrusted goes to innerHTML.
"use strict";

(() => {
  const KEY_STORAGE = "triage.apiKey"; // shared with the chat view
  const PAGE_SIZE = 20;
  const MAX_OUTPUT_CHARS = 20000;
  const TITLE_MAX = 200;
  const LIST_REFRESH_MS = 15000;
  const RETRY_FIRST_MS = 250;
  const RETRY_MAX_MS = 5000;
  // A connection that lasted this long or brought an event was good: the backoff starts over.
  // One a server ends at once counts as a failure, so it is not asked again without pause.
  const HEALTHY_AFTER_MS = 5000;
  // Markdown is rendered from at most this much text (a huge answer would freeze the tab).
  const MARKDOWN_MAX_CHARS = 100000;
  // A frame longer than this (a server that never ends one) breaks the connection.
  const FRAME_MAX_CHARS = 16 * 1024 * 1024;
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
  const RUNNING = new Set(["running"]);
  const RESUMABLE = new Set(["idle", "paused", "error", "stuck"]);
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

  const $ = (id) => document.getElementById(id);

  const conv = {
    view: "chat",
    pages: [null], // page_id of each page visited; pages[0] is the first page
    page: 0,
    nextPageId: null,
    items: [],
    openId: null,
    info: null,
    controller: null, // aborts the open conversation's stream
    lastId: 0, // the last event shown
    received: [], // the id of every frame read off the wire, duplicates included (tests)
    applied: [], // the ids of the events shown, in order
    cards: new Map(),
    infoTimer: null,
    live: "idle",
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

  function askForKey(message) {
    $("key-panel").hidden = false;
    $("key-message").textContent = message;
    $("api-key").focus();
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

  // A JSON API call; throws an Error whose message says what the server answered.
  async function api(method, path, body) {
    const init = { method, headers: headers({ Accept: "application/json" }) };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      throw new Error(`Cannot reach the server: ${e.message}`);
    }
    if (!response.ok) {
      const detail = await detailOf(response);
      if (response.status === 401) {
        askForKey(apiKey() ? "The API key was refused. Enter another one." : "This server requires an API key.");
      }
      const error = new Error(`HTTP ${response.status}: ${detail}`);
      error.status = response.status;
      throw error;
    }
    return response.json();
  }

  function statusBadge(status) {
    const badge = el("span", "badge", STATUS_LABELS[status] || str(status) || "?");
    badge.dataset.status = str(status);
    return badge;
  }

  function titleOf(info) {
    const t = str(info && info.title).trim();
    return t ? clip(t, TITLE_MAX) : "Untitled conversation";
  }

  function ago(iso) {
    const t = Date.parse(iso);
    if (!Number.isFinite(t)) return "";
    const s = Math.max(0, Math.round((Date.now() - t) / 1000));
    if (s < 60) return `${s} s ago`;
    if (s < 3600) return `${Math.round(s / 60)} min ago`;
    if (s < 86400) return `${Math.round(s / 3600)} h ago`;
    return new Date(t).toLocaleDateString();
  }

  // ---------------------------------------------------------------- views

  function setView(view, { updateHash = true } = {}) {
    conv.view = view;
    for (const node of document.querySelectorAll("[data-view]")) {
      node.hidden = node.dataset.view !== view;
    }
    $("view-chat").setAttribute("aria-selected", String(view === "chat"));
    $("view-conversations").setAttribute("aria-selected", String(view === "conversations"));
    if (updateHash) {
      const hash = view === "chat" ? "" : conv.openId ? `#conversations/${conv.openId}` : "#conversations";
      history.replaceState(null, "", `${location.pathname}${location.search}${hash}`);
    }
    if (view === "conversations") loadList();
  }

  // `#conversations` and `#conversations/<id>` open this view (bookmarks, reloads, links).
  function route() {
    const m = location.hash.match(/^#conversations(?:\/([0-9a-fA-F-]{36}))?$/);
    if (!m) {
      if (conv.view !== "chat") setView("chat", { updateHash: false });
      return;
    }
    if (conv.view !== "conversations") setView("conversations", { updateHash: false });
    if (m[1] && m[1].toLowerCase() !== conv.openId) openConversation(m[1]);
  }

  // ---------------------------------------------------------------- the list

  function listMessage(text, isError) {
    const p = $("conv-list-message");
    p.textContent = text || "";
    p.hidden = !text;
    p.classList.toggle("notice-error", Boolean(isError));
  }

  async function loadList() {
    const params = new URLSearchParams({ limit: String(PAGE_SIZE), sort_order: "UPDATED_AT_DESC" });
    const status = $("conv-status").value;
    if (status) params.set("status", status);
    const pageId = conv.pages[conv.page];
    if (pageId) params.set("page_id", pageId);
    let page;
    try {
      page = await api("GET", `/api/conversations/search?${params}`);
    } catch (e) {
      listMessage(e.message, true);
      return;
    }
    conv.items = Array.isArray(page.items) ? page.items : [];
    conv.nextPageId = typeof page.next_page_id === "string" ? page.next_page_id : null;
    renderList();
  }

  function renderList() {
    const needle = $("conv-filter").value.trim().toLowerCase();
    const shown = conv.items.filter(
      (c) => !needle || str(c.title).toLowerCase().includes(needle) || str(c.id).includes(needle),
    );
    const list = $("conv-list");
    list.replaceChildren(
      ...shown.map((c) => {
        const li = el("li", "conv-item");
        li.dataset.id = str(c.id);
        if (c.id === conv.openId) li.classList.add("active");
        const button = el("button", "conv-link");
        button.type = "button";
        const title = el("span", "conv-item-title", titleOf(c));
        title.title = titleOf(c);
        const meta = el("span", "conv-item-meta", `${ago(c.updated_at)} · ${str(c.id).slice(0, 8)}`);
        button.append(statusBadge(c.execution_status), title, meta);
        button.addEventListener("click", () => openConversation(str(c.id)));
        li.append(button);
        return li;
      }),
    );
    if (!conv.items.length) listMessage($("conv-status").value ? "No conversation has this status." : "No conversations yet.");
    else if (!shown.length) listMessage("Nothing on this page matches the filter.");
    else listMessage("");
    $("conv-newer").disabled = conv.page === 0;
    $("conv-older").disabled = !conv.nextPageId;
    $("conv-page").textContent = `Page ${conv.page + 1}`;
  }

  function updateListItem(info) {
    const item = conv.items.find((c) => c.id === info.id);
    if (!item) return;
    // Only the fields shown, copied one by one (a server's JSON is never merged wholesale).
    for (const field of ["execution_status", "title", "updated_at"]) {
      if (typeof info[field] === "string") item[field] = info[field];
    }
    renderList();
  }

  async function startConversation(text) {
    const body = { initial_message: { content: text } };
    const model = $("model").value;
    if (model) body.model = model;
    const button = $("conv-new-send");
    button.disabled = true;
    try {
      const info = await api("POST", "/api/conversations", body);
      $("conv-new-text").value = "";
      conv.page = 0;
      conv.pages = [null];
      await loadList();
      openConversation(str(info.id));
    } catch (e) {
      listMessage(e.message, true);
    } finally {
      button.disabled = false;
    }
  }

  // ---------------------------------------------------------------- one conversation

  function openConversation(raw) {
    const id = String(raw || "").toLowerCase();
    if (!UUID.test(id)) return; // only a conversation id ever goes into a request path
    if (conv.controller) conv.controller.abort();
    const controller = new AbortController();
    Object.assign(conv, {
      openId: id,
      info: null,
      controller,
      lastId: 0,
      received: [],
      applied: [],
      cards: new Map(),
    });
    history.replaceState(null, "", `${location.pathname}${location.search}#conversations/${id}`);
    $("conv-empty").hidden = true;
    $("conv-open").hidden = false;
    $("conv-log").replaceChildren();
    $("conv-approvals").replaceChildren();
    $("conv-title").textContent = "…";
    $("conv-badge").replaceChildren();
    $("conv-stats").textContent = "";
    for (const li of $("conv-list").children) li.classList.toggle("active", li.dataset.id === id);
    refreshInfo();
    follow(id, controller);
  }

  async function refreshInfo() {
    const id = conv.openId;
    let info;
    try {
      info = await api("GET", `/api/conversations/${id}`);
    } catch (e) {
      if (id === conv.openId) logNotice("error", e.message);
      return;
    }
    if (id !== conv.openId) return;
    conv.info = info;
    showInfo(info);
    updateListItem(info);
  }

  // State updates come in bursts while a log is replayed: read the info once they settle.
  function refreshInfoSoon() {
    clearTimeout(conv.infoTimer);
    conv.infoTimer = setTimeout(refreshInfo, 100);
  }

  function showInfo(info) {
    $("conv-title").textContent = titleOf(info);
    $("conv-title").title = `${titleOf(info)}\n${str(info.id)}`;
    showStatus(info.execution_status, info.reason);
    const s = info.stats || {};
    const cost = typeof s.cost === "number" && s.cost > 0 ? ` · $${s.cost.toFixed(4)}` : "";
    $("conv-stats").textContent = `${Number(s.llm_calls) || 0} LLM calls · context ${Number(s.context_tokens) || 0} tokens${cost}`;
    showApprovals(info);
  }

  function showStatus(status, reason) {
    const badge = statusBadge(status);
    if (reason) badge.title = clip(str(reason), 2000);
    $("conv-badge").replaceChildren(badge);
    const running = RUNNING.has(status);
    $("conv-pause").disabled = !running;
    $("conv-interrupt").disabled = !running;
    $("conv-run").disabled = !RESUMABLE.has(status);
    const waiting = status === "waiting_for_confirmation";
    // Answered (here or elsewhere): the panel goes now; the info read next rebuilds it if due.
    if (!waiting) $("conv-approvals").replaceChildren();
    $("conv-send").disabled = waiting;
    $("conv-send-text").disabled = waiting;
    $("conv-send-text").placeholder = waiting
      ? "Approve or deny the pending tool calls to continue"
      : running
        ? "Send a message: the run takes it at its next step"
        : "Send a message and run (Enter sends, Shift+Enter for a new line)";
  }

  function setLive(state, text) {
    conv.live = state;
    const live = $("conv-live");
    live.dataset.state = state;
    live.textContent = text;
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

  // Follows one conversation's stream until it is closed or another one is opened: from the
  // start (the history, from the store), then live; after a drop, from the last event shown.
  async function follow(id, controller) {
    const { signal } = controller;
    let delay = RETRY_FIRST_MS;
    while (!signal.aborted) {
      const h = headers({ Accept: "text/event-stream" });
      if (conv.lastId > 0) h["Last-Event-ID"] = String(conv.lastId);
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
        if (response.status === 401) {
          askForKey("This server requires an API key to follow conversations.");
        }
        if (response.status < 500) {
          setLive("closed", response.status === 404 ? "Deleted" : "Not following");
          logNotice("error", `HTTP ${response.status}: ${detail}`);
          return;
        }
        why = `HTTP ${response.status}: ${detail}`;
      } else if (response) {
        setLive("live", "Live");
        const opened = Date.now();
        const before = conv.lastId;
        try {
          await readFrames(response.body, (frame) => {
            if (!signal.aborted) take(frame);
          });
          why = "the server ended the stream";
        } catch (e) {
          why = e.message;
        }
        if (signal.aborted) return;
        if (conv.lastId > before || Date.now() - opened >= HEALTHY_AFTER_MS) delay = RETRY_FIRST_MS;
      }
      setLive("reconnecting", "Reconnecting…");
      $("conv-live").title = clip(why, 500);
      await sleep(delay, signal);
      delay = Math.min(delay * 2, RETRY_MAX_MS);
    }
  }

  function take(frame) {
    const id = Number(frame.id);
    if (!Number.isSafeInteger(id) || id <= 0) return;
    conv.received.push(id);
    if (id <= conv.lastId) return; // shown already: never twice
    conv.lastId = id;
    let payload;
    try {
      payload = JSON.parse(frame.data);
    } catch {
      payload = null;
    }
    conv.applied.push(id);
    if (payload && typeof payload === "object") render(id, frame.event, payload);
  }

  // ---------------------------------------------------------------- rendering events

  const log = () => $("conv-log");

  function nearBottom() {
    const l = log();
    return l.scrollHeight - l.scrollTop - l.clientHeight < 120;
  }

  function add(id, node) {
    const stick = nearBottom();
    node.dataset.eventId = String(id);
    log().append(node);
    if (stick) log().scrollTop = log().scrollHeight;
    return node;
  }

  function logNotice(kind, text, id) {
    const node = el("div", `notice notice-${kind}`, text);
    if (kind === "error") node.setAttribute("role", "alert");
    if (id === undefined) {
      log().append(node);
      return node;
    }
    return add(id, node);
  }

  function card(id, callId, name) {
    let c = conv.cards.get(callId);
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
    conv.cards.set(callId, c);
    setToolStatus(c, "running");
    add(id, details);
    return c;
  }

  function setToolStatus(c, status) {
    c.status.dataset.status = status;
    c.status.textContent = TOOL_STATUS_LABELS[status] || status;
  }

  function toolResult(id, p) {
    const name = str(p.name) || str(p.tool_name) || "tool";
    const c = card(id, str(p.tool_call_id), name);
    const r = p.result && typeof p.result === "object" ? p.result : {};
    c.title.textContent = name;
    c.desc.textContent = clip(str(p.description), 500);
    setToolStatus(c, str(r.status) || "success");
    c.body.replaceChildren();
    const section = (label, text, cls) => {
      c.body.append(el("div", "tool-label", label), el("pre", cls, clip(text)));
    };
    if (r.params !== undefined && r.params !== null) section("Parameters", pretty(r.params), "params");
    if (r.invocation) section("Invocation", pretty(r.invocation), "invocation");
    if (r.error) section("Error", pretty(r.error), "tool-error");
    if (r.data !== undefined && r.data !== null && r.data !== "") section("Output", pretty(r.data), "output");
  }

  function render(id, name, p) {
    switch (name) {
      case "user_message": {
        const node = el("div", "msg user");
        node.append(el("div", "who", "You"), el("div", "user-text", clip(str(p.content))));
        if (Number(p.images) > 0) node.append(el("div", "hint", `${Number(p.images)} image(s)`));
        add(id, node);
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
        add(id, node);
        break;
      }
      case "start_tool_calling":
        card(id, str(p.id), str(p.tool_name));
        break;
      case "tool_calling_result":
        toolResult(id, p);
        break;
      case "approval_required": {
        const calls = [...(p.pending_approvals || []), ...(p.pending_frontend_tool_calls || [])];
        const names = calls.map((c) => `${str(c.tool_name)}${c.description ? `: ${str(c.description)}` : ""}`);
        logNotice("warn", clip(`Waiting for approval — ${names.join("; ") || "a tool call"}`, 2000), id);
        break;
      }
      case "ai_answer_end": {
        const node = el("div", "msg assistant");
        node.append(el("div", "who", "triage"), markdown("answer", str(p.analysis)));
        add(id, node);
        break;
      }
      case "conversation_state_update": {
        const line = el("div", "conv-state");
        line.append(statusBadge(p.execution_status));
        if (p.reason) line.append(el("span", "hint", clip(str(p.reason), 2000)));
        add(id, line);
        showStatus(str(p.execution_status), p.reason);
        updateListItem({ id: conv.openId, execution_status: str(p.execution_status) });
        refreshInfoSoon();
        break;
      }
      case "error":
        logNotice("error", clip(`Error: ${str(p.description) || str(p.msg) || "unknown error"}`), id);
        break;
      case "interrupted": {
        const cut = Array.isArray(p.cut_tool_calls) ? p.cut_tool_calls.length : 0;
        logNotice("info", `Interrupted${cut ? `: ${cut} tool call(s) cut` : ""}.`, id);
        break;
      }
      case "paused":
        logNotice("info", "Paused after the step.", id);
        break;
      case "stuck":
        logNotice("error", clip(`Stuck: ${str(p.pattern)}`, 2000), id);
        break;
      case "conversation_history_compaction_start":
      case "conversation_history_compacted":
        logNotice("compaction", clip(str(p.content) || "Compacting the conversation history…", 2000), id);
        break;
      default:
        break; // stored messages, token counts, and kinds this console does not know
    }
  }

  // ---------------------------------------------------------------- approvals and actions

  function showApprovals(info) {
    const box = $("conv-approvals");
    const pending = Array.isArray(info.pending_actions) ? info.pending_actions : [];
    if (info.execution_status !== "waiting_for_confirmation" || !pending.length) {
      box.replaceChildren();
      return;
    }
    const key = pending.map((p) => str(p.tool_call_id)).join(",");
    if (box.dataset.calls === key && box.firstChild) return; // already shown, maybe half decided
    box.dataset.calls = key;
    const panel = el("section", "approval");
    const approvals = pending.filter((p) => p.waits_for === "approval");
    panel.append(el("h3", "", approvals.length > 1 ? `${approvals.length} tool calls need your approval` : "A tool call needs your approval"));
    const decisions = new Map();
    const error = el("div", "notice notice-error");
    error.hidden = true;
    for (const a of pending) {
      const item = el("div", "approval-item");
      item.dataset.toolCallId = str(a.tool_call_id);
      item.append(el("div", "approval-tool", str(a.tool_name)));
      if (a.waits_for !== "approval") {
        item.append(el("p", "hint", "Waits for a browser tool's result, which this view cannot give."));
        panel.append(item);
        continue;
      }
      item.append(el("pre", "approval-desc", clip(str(a.description) || pretty(a.arguments), 2000)));
      if (a.arguments && typeof a.arguments === "object" && Object.keys(a.arguments).length) {
        const d = el("details", "approval-params");
        d.append(el("summary", "", "Parameters"), el("pre", "params", clip(pretty(a.arguments))));
        item.append(d);
      }
      const feedback = el("input", "feedback");
      feedback.type = "text";
      feedback.placeholder = "Feedback for the model if you deny (optional)";
      const approve = el("button", "approve", "Approve");
      approve.type = "button";
      const deny = el("button", "deny danger", "Deny");
      deny.type = "button";
      const outcome = el("span", "decision");
      const row = el("div", "approval-actions");
      row.append(approve, deny, feedback, outcome);
      item.append(row);
      const decide = (approved) => {
        const decision = { tool_call_id: str(a.tool_call_id), approved };
        const text = feedback.value.trim();
        if (!approved && text) decision.feedback = text;
        decisions.set(decision.tool_call_id, { decision, controls: [approve, deny, feedback], item, outcome });
        approve.disabled = deny.disabled = feedback.disabled = true;
        item.dataset.decision = approved ? "approved" : "denied";
        outcome.textContent = approved ? "Approved" : text ? `Denied: ${text}` : "Denied";
        if (decisions.size === approvals.length) respond(panel, decisions, error);
      };
      approve.addEventListener("click", () => decide(true));
      deny.addEventListener("click", () => decide(false));
      panel.append(item);
    }
    panel.append(error);
    panel.dataset.state = "pending";
    box.replaceChildren(panel);
  }

  async function respond(panel, decisions, error) {
    const id = conv.openId;
    panel.dataset.state = "sending";
    try {
      await api("POST", `/api/conversations/${id}/events/respond_to_confirmation`, {
        tool_decisions: [...decisions.values()].map((d) => d.decision),
      });
      panel.dataset.state = "sent";
    } catch (e) {
      // Undecided again, so the user can try once more.
      panel.dataset.state = "pending";
      error.textContent = e.message;
      error.hidden = false;
      for (const d of decisions.values()) {
        for (const c of d.controls) c.disabled = false;
        delete d.item.dataset.decision;
        d.outcome.textContent = "";
      }
      decisions.clear();
    }
  }

  async function action(verb) {
    const id = conv.openId;
    if (!id) return;
    try {
      await api("POST", `/api/conversations/${id}/${verb}`, {});
    } catch (e) {
      logNotice("error", e.message);
    }
    refreshInfoSoon();
  }

  async function sendMessage() {
    const box = $("conv-send-text");
    const text = box.value.trim();
    const id = conv.openId;
    if (!text || !id) return;
    $("conv-send").disabled = true;
    try {
      await api("POST", `/api/conversations/${id}/events`, { content: text, run: true });
      box.value = "";
    } catch (e) {
      logNotice("error", e.message);
    } finally {
      $("conv-send").disabled = conv.info && conv.info.execution_status === "waiting_for_confirmation";
    }
  }

  // ---------------------------------------------------------------- wiring

  function submitOnEnter(textarea, form) {
    textarea.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        form.requestSubmit();
      }
    });
  }

  function init() {
    $("view-chat").addEventListener("click", () => setView("chat"));
    $("view-conversations").addEventListener("click", () => setView("conversations"));
    window.addEventListener("hashchange", route);
    $("conv-status").addEventListener("change", () => {
      conv.page = 0;
      conv.pages = [null];
      loadList();
    });
    $("conv-filter").addEventListener("input", renderList);
    $("conv-refresh").addEventListener("click", loadList);
    $("conv-newer").addEventListener("click", () => {
      if (conv.page === 0) return;
      conv.page -= 1;
      loadList();
    });
    $("conv-older").addEventListener("click", () => {
      if (!conv.nextPageId) return;
      conv.pages[conv.page + 1] = conv.nextPageId;
      conv.page += 1;
      loadList();
    });
    $("conv-new-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const text = $("conv-new-text").value.trim();
      if (text) startConversation(text);
    });
    submitOnEnter($("conv-new-text"), $("conv-new-form"));
    $("conv-send-form").addEventListener("submit", (e) => {
      e.preventDefault();
      sendMessage();
    });
    submitOnEnter($("conv-send-text"), $("conv-send-form"));
    $("conv-pause").addEventListener("click", () => action("pause"));
    $("conv-interrupt").addEventListener("click", () => action("interrupt"));
    $("conv-run").addEventListener("click", () => action("run"));
    // A key given in the key panel: read again what the refusal left empty.
    $("key-form").addEventListener("submit", () => {
      if (conv.view !== "conversations") return;
      loadList();
      if (conv.openId && conv.live === "closed") openConversation(conv.openId);
    });
    setInterval(() => {
      if (conv.view === "conversations" && !document.hidden) loadList();
    }, LIST_REFRESH_MS);
    route();
  }

  // For tests and the curious: what the open conversation's stream delivered and showed.
  window.triageConversations = {
    snapshot: () => ({
      openId: conv.openId,
      lastId: conv.lastId,
      live: conv.live,
      received: conv.received.slice(),
      applied: conv.applied.slice(),
    }),
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
