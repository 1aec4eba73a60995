// triage console, conversations view: the conversations that live on the server
// (/api/conversations). A list with status badges, a status filter and paging; one
// conversation opened with its events replayed from the store and then followed live
// (conversation-log.js); pause, interrupt, resume, approvals and a message box.
//
// Everything a server, a model or another user wrote is set as text (textContent), or as the
// chat view's markdown, which escapes all HTML first. Nothing untrusted goes to innerHTML.
"use strict";

(() => {
  const { el, str, clip, pretty, headers, apiKey, detailOf, statusBadge, EventLog, follow } =
    window.triageConversationLog;
  const PAGE_SIZE = 20;
  const TITLE_MAX = 200;
  const LIST_REFRESH_MS = 15000;
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
  const RUNNING = new Set(["running"]);
  const RESUMABLE = new Set(["idle", "paused", "error", "stuck"]);
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
    log: null, // the open conversation's EventLog
    infoTimer: null,
    live: "idle",
  };

  // ---------------------------------------------------------------- helpers

  function askForKey(message) {
    $("key-panel").hidden = false;
    $("key-message").textContent = message;
    $("api-key").focus();
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
    const log = new EventLog($("conv-log"), (status, reason) => {
      showStatus(status, reason);
      updateListItem({ id, execution_status: status });
      refreshInfoSoon();
    });
    Object.assign(conv, { openId: id, info: null, controller, log });
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
    follow(id, controller.signal, log, {
      live: setLive,
      refused(status, detail) {
        if (status === 401) askForKey("This server requires an API key to follow conversations.");
        setLive("closed", status === 404 ? "Deleted" : "Not following", "");
        log.notice("error", `HTTP ${status}: ${detail}`);
      },
    });
  }

  async function refreshInfo() {
    const id = conv.openId;
    let info;
    try {
      info = await api("GET", `/api/conversations/${id}`);
    } catch (e) {
      if (id === conv.openId) conv.log.notice("error", e.message);
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

  function setLive(state, text, why) {
    conv.live = state;
    const live = $("conv-live");
    live.dataset.state = state;
    live.textContent = text;
    live.title = why || "";
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
      conv.log.notice("error", e.message);
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
      conv.log.notice("error", e.message);
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
      lastId: conv.log ? conv.log.lastId : 0,
      live: conv.live,
      received: conv.log ? conv.log.received.slice() : [],
      applied: conv.log ? conv.log.applied.slice() : [],
    }),
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
