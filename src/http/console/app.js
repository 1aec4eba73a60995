// triage console: a single page that streams /api/chat. No framework and no build step:
// the SSE frames are parsed here from fetch()'s ReadableStream, and model text is rendered by
// a small markdown renderer that escapes all HTML first.
"use strict";

(() => {
  const KEY_STORAGE = "triage.apiKey";
  const MAX_OUTPUT_CHARS = 20000;
  const TERMINAL_EVENTS = new Set(["ai_answer_end", "approval_required", "error"]);

  // Browser-side tools offered to the model with every request (they are not stored server-side).
  const FRONTEND_TOOLS = [
    {
      name: "show_table",
      description:
        "Show a table to the user in their browser console. Use it for tabular data such as " +
        "pods, nodes, events or metrics. Returns a description of what was rendered.",
      mode: "pause",
      parameters: {
        type: "object",
        properties: {
          title: { type: "string", description: "Short caption for the table" },
          columns: { type: "array", items: { type: "string" }, description: "Column headings" },
          rows: {
            type: "array",
            items: { type: "array", items: { type: "string" } },
            description: "Rows, each a list of cells in column order",
          },
        },
        required: ["columns", "rows"],
      },
    },
    {
      name: "highlight",
      description:
        "Highlight text, or a section by its heading, that is already shown in the user's " +
        "console, to draw their attention to it.",
      mode: "noop",
      noop_response: "Highlighted in the user's console.",
      parameters: {
        type: "object",
        properties: {
          text: { type: "string", description: "The exact text or section heading to highlight" },
        },
        required: ["text"],
      },
    },
  ];

  const $ = (id) => document.getElementById(id);

  const state = {
    history: null, // conversation_history of the last finished answer
    busy: false,
    paused: false, // an approval or a browser tool is waiting
    controller: null,
    retry: null, // a request refused with 401, sent again once a key is given
    enabledToolsets: null, // Set of toolset names from /api/info; null while unknown
  };

  // The server's follow-up actions and the toolset each one needs: an action whose toolset is
  // not enabled here could only fail, so it is not offered.
  const FOLLOW_UP_TOOLSETS = { logs: "kubernetes", graphs: "prometheus", articles: "internet" };
  const README_PATH = "/console/readme.md";
  const README_SECTION = "## Pointing triage at an LLM";

  // ---------------------------------------------------------------- DOM helpers

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function pretty(value) {
    if (typeof value === "string") return value;
    try {
      return JSON.stringify(value, null, 2);
    } catch {
      return String(value);
    }
  }

  function clip(text) {
    const s = String(text ?? "");
    if (s.length <= MAX_OUTPUT_CHARS) return s;
    return `${s.slice(0, MAX_OUTPUT_CHARS)}\n… (${s.length - MAX_OUTPUT_CHARS} more characters not shown)`;
  }

  const transcript = () => $("transcript");

  function nearBottom() {
    const t = transcript();
    return t.scrollHeight - t.scrollTop - t.clientHeight < 120;
  }

  function scrollDown(force) {
    const t = transcript();
    if (force || nearBottom()) t.scrollTop = t.scrollHeight;
  }

  // ---------------------------------------------------------------- markdown

  function escapeHtml(s) {
    return s.replace(
      /[&<>"']/g,
      (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c],
    );
  }

  // Renders markdown to HTML. All of the source is HTML-escaped first; the only tags in the
  // result come from the templates below, and links keep http(s) URLs only.
  function renderMarkdown(source) {
    const text = escapeHtml(String(source ?? "").replace(/\u0000/g, "")).replace(/\r\n?/g, "\n");
    return blocks(text.split("\n"));
  }

  const FENCE = /^(\s*)(`{3,}|~{3,})\s*([\w+#.-]*)[^`]*$/;
  const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$/;
  const RULE = /^\s{0,3}([-*_])(?:\s*\1){2,}\s*$/;
  const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
  const QUOTE = /^\s{0,3}&gt;\s?(.*)$/;
  const TABLE_RULE = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

  function isTableStart(lines, i) {
    return lines[i].includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]);
  }

  function startsBlock(lines, i) {
    const line = lines[i];
    return (
      FENCE.test(line) ||
      HEADING.test(line) ||
      RULE.test(line) ||
      LIST_ITEM.test(line) ||
      QUOTE.test(line) ||
      isTableStart(lines, i)
    );
  }

  // A fenced code block starting at lines[i]: [html, next index].
  function fence(lines, i) {
    const m = lines[i].match(FENCE);
    const marker = m[2];
    const lang = m[3];
    const code = [];
    let j = i + 1;
    while (j < lines.length && !lines[j].trim().startsWith(marker)) {
      code.push(lines[j].slice(Math.min(m[1].length, lines[j].length - lines[j].trimStart().length)));
      j++;
    }
    const attr = lang ? ` data-lang="${lang}"` : "";
    return [`<pre class="code"><code${attr}>${code.join("\n")}</code></pre>`, j + 1];
  }

  function splitRow(line) {
    let s = line.trim();
    if (s.startsWith("|")) s = s.slice(1);
    if (s.endsWith("|")) s = s.slice(0, -1);
    return s.split("|").map((c) => c.trim());
  }

  function table(lines, i) {
    const head = splitRow(lines[i]);
    let j = i + 2;
    const rows = [];
    while (j < lines.length && lines[j].includes("|") && lines[j].trim()) {
      rows.push(splitRow(lines[j]));
      j++;
    }
    const th = head.map((c) => `<th>${inline(c)}</th>`).join("");
    const body = rows
      .map((r) => `<tr>${head.map((_, k) => `<td>${inline(r[k] ?? "")}</td>`).join("")}</tr>`)
      .join("");
    return [`<div class="table-wrap"><table><thead><tr>${th}</tr></thead><tbody>${body}</tbody></table></div>`, j];
  }

  function list(lines, i) {
    const first = lines[i].match(LIST_ITEM);
    const indent = first[1].length;
    const ordered = /\d/.test(first[2]);
    const start = ordered ? parseInt(first[2], 10) : 1;
    const items = [];
    while (i < lines.length) {
      const line = lines[i];
      const m = line.match(LIST_ITEM);
      if (m && Math.abs(m[1].length - indent) <= 1) {
        if (/\d/.test(m[2]) !== ordered) break;
        items.push({ text: [m[3]], children: [] });
        i++;
      } else if (m && m[1].length > indent + 1 && items.length) {
        const [html, next] = list(lines, i);
        items[items.length - 1].children.push(html);
        i = next;
      } else if (m) {
        break;
      } else if (FENCE.test(line) && /^\s+/.test(line) && items.length) {
        const [html, next] = fence(lines, i);
        items[items.length - 1].children.push(html);
        i = next;
      } else if (line.trim() && /^\s+/.test(line) && items.length && !startsBlock(lines, i)) {
        items[items.length - 1].text.push(line.trim());
        i++;
      } else if (!line.trim()) {
        let j = i + 1;
        while (j < lines.length && !lines[j].trim()) j++;
        const n = j < lines.length ? lines[j].match(LIST_ITEM) : null;
        if (n && n[1].length >= indent - 1 && /\d/.test(n[2]) === ordered) {
          i = j;
        } else if (j < lines.length && /^\s{2,}\S/.test(lines[j]) && !n && items.length) {
          i = j; // an indented paragraph continues the item
        } else {
          break;
        }
      } else {
        break;
      }
    }
    const tag = ordered ? "ol" : "ul";
    const startAttr = ordered && start !== 1 ? ` start="${start}"` : "";
    const lis = items
      .map((it) => `<li>${it.text.map(inline).join("<br>")}${it.children.join("")}</li>`)
      .join("");
    return [`<${tag}${startAttr}>${lis}</${tag}>`, i];
  }

  function blocks(lines) {
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (!line.trim()) {
        i++;
      } else if (FENCE.test(line)) {
        const [html, next] = fence(lines, i);
        out.push(html);
        i = next;
      } else if ((m = line.match(HEADING))) {
        const level = m[1].length;
        out.push(`<h${level}>${inline(m[2])}</h${level}>`);
        i++;
      } else if (RULE.test(line)) {
        out.push("<hr>");
        i++;
      } else if (isTableStart(lines, i)) {
        const [html, next] = table(lines, i);
        out.push(html);
        i = next;
      } else if (QUOTE.test(line)) {
        const quoted = [];
        while (i < lines.length && (m = lines[i].match(QUOTE))) {
          quoted.push(m[1]);
          i++;
        }
        out.push(`<blockquote>${blocks(quoted)}</blockquote>`);
      } else if (LIST_ITEM.test(line)) {
        const [html, next] = list(lines, i);
        out.push(html);
        i = next;
      } else {
        const para = [];
        while (i < lines.length && lines[i].trim() && (para.length === 0 || !startsBlock(lines, i))) {
          para.push(inline(lines[i].trim()));
          i++;
        }
        out.push(`<p>${para.join("<br>")}</p>`);
      }
    }
    return out.join("");
  }

  // Inline markup on already-escaped text: code spans and links are set aside first so that
  // emphasis never rewrites their contents.
  function inline(s) {
    const slots = [];
    const keep = (html) => `\u0000${slots.push(html) - 1}\u0000`;
    s = s.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (_, __, code) => keep(`<code>${code.trim()}</code>`));
    s = s.replace(/\[([^\]]+)\]\(\s*((?:[^\s()]|\([^\s()]*\))+)\s*\)/g, (all, label, url) => {
      if (!/^https?:\/\/[^\s]+$/i.test(url)) return label;
      return keep(`<a href="${url}" target="_blank" rel="noopener noreferrer">${emphasis(label)}</a>`);
    });
    s = s.replace(/(^|[\s(])(https?:\/\/[^\s<\u0000]*[^\s<\u0000.,;:!?)\]'"&])/gi, (_, pre, url) =>
      pre + keep(`<a href="${url}" target="_blank" rel="noopener noreferrer">${url}</a>`),
    );
    s = emphasis(s);
    for (let n = 0; n < 3 && s.includes("\u0000"); n++) {
      s = s.replace(/\u0000(\d+)\u0000/g, (_, k) => slots[Number(k)]);
    }
    return s;
  }

  function emphasis(s) {
    return s
      .replace(/\*\*([^\s*](?:[\s\S]*?[^\s*])?)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^\w])__([^\s_](?:[\s\S]*?[^\s_])?)__(?!\w)/g, "$1<strong>$2</strong>")
      .replace(/\*([^\s*](?:[^*]*?[^\s*])?)\*/g, "<em>$1</em>")
      .replace(/(^|[^\w])_([^\s_](?:[^_]*?[^\s_])?)_(?!\w)/g, "$1<em>$2</em>")
      .replace(/~~([^\s~](?:[^~]*?[^\s~])?)~~/g, "<del>$1</del>");
  }

  function markdownBlock(className, source) {
    const div = el("div", `markdown ${className}`);
    div.innerHTML = renderMarkdown(source); // escaped by renderMarkdown
    return div;
  }

  // ---------------------------------------------------------------- API access

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

  async function errorDetail(response) {
    let text = "";
    try {
      text = await response.text();
    } catch {
      return response.statusText || "no details";
    }
    try {
      const body = JSON.parse(text);
      const detail = body && "detail" in body ? body.detail : body;
      if (typeof detail === "string") return detail;
      if (Array.isArray(detail)) {
        return detail
          .map((d) => (d && d.msg ? `${(d.loc || []).join(".")}: ${d.msg}` : pretty(d)))
          .join("; ");
      }
      return pretty(detail);
    } catch {
      return text.trim() || response.statusText || "no details";
    }
  }

  function showKeyPanel(message) {
    $("key-panel").hidden = false;
    $("key-message").textContent = message;
    $("api-key").focus();
  }

  async function loadModels() {
    let response;
    try {
      response = await fetch("/api/model", { headers: headers({ Accept: "application/json" }) });
    } catch (e) {
      setUsageText(`Cannot reach the server: ${e.message}`);
      return;
    }
    if (response.status === 401) {
      const detail = await errorDetail(response);
      showKeyPanel(
        apiKey()
          ? `The API key was refused (${detail}). Enter another one.`
          : "This server requires an API key. It is kept in this tab's session storage only.",
      );
      return;
    }
    if (!response.ok) {
      setUsageText(`Cannot list models: HTTP ${response.status}: ${await errorDetail(response)}`);
      return;
    }
    let names = (await response.json()).model_name;
    if (typeof names === "string") {
      try {
        names = JSON.parse(names); // HolmesGPT-compatible servers may send a JSON string
      } catch {
        names = [names];
      }
    }
    const select = $("model");
    const chosen = select.value;
    const list = Array.isArray(names) ? names : [];
    // triage lists its default model first.
    select.replaceChildren(new Option(list.length ? `Server default (${list[0]})` : "Server default", ""));
    for (const name of list) {
      select.append(new Option(name, name, false, name === chosen));
    }
  }

  // Which toolsets work here, so follow-ups that need a missing one are not offered.
  async function loadToolsets() {
    try {
      const response = await fetch("/api/info", { headers: headers({ Accept: "application/json" }) });
      if (!response.ok) return;
      const info = await response.json();
      const toolsets = Array.isArray(info.toolsets) ? info.toolsets : [];
      state.enabledToolsets = new Set(
        toolsets.filter((t) => t && t.status === "enabled").map((t) => t.name),
      );
    } catch {
      // unknown: every follow-up stays offered
    }
  }

  // Before anyone types: a server without a model can answer nothing, so say so at once, with
  // the README's section on configuring one.
  async function checkReady() {
    let response;
    try {
      response = await fetch("/readyz", { headers: { Accept: "application/json" } });
    } catch {
      return;
    }
    if (response.status !== 503) return;
    const detail = await errorDetail(response);
    const notice = $("setup-notice");
    if (!notice) return;
    const link = el("a", null, "README: Pointing triage at an LLM");
    link.href = README_PATH;
    link.addEventListener("click", async (e) => {
      e.preventDefault();
      link.remove();
      try {
        const readme = await (await fetch(README_PATH)).text();
        const start = readme.indexOf(README_SECTION);
        const end = readme.indexOf("\n## ", start + README_SECTION.length);
        const section = start < 0 ? readme : readme.slice(start, end < 0 ? undefined : end);
        notice.append(markdownBlock("readme", section));
      } catch (err) {
        notice.append(el("p", "hint", `Cannot load the README: ${err.message}`));
      }
    });
    notice.replaceChildren(el("p", null, detail), link);
    notice.hidden = false;
  }

  // ---------------------------------------------------------------- SSE

  // Reads `event:`/`data:` frames from a fetch() body. Comment lines (`: keep-alive`) and
  // frames without data are skipped, as EventSource does.
  async function readEvents(body, onEvent) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let name = "";
    let data = [];
    const line = (l) => {
      if (l === "") {
        if (data.length) onEvent(name || "message", data.join("\n"));
        name = "";
        data = [];
        return;
      }
      if (l.startsWith(":")) return;
      const colon = l.indexOf(":");
      const field = colon < 0 ? l : l.slice(0, colon);
      let value = colon < 0 ? "" : l.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") name = value;
      else if (field === "data") data.push(value);
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      // A trailing "\r" may be the first half of "\r\n": keep it for the next chunk.
      const lines = buffer.split(/\r\n|\n|\r(?!$)/);
      buffer = lines.pop();
      lines.forEach(line);
    }
    buffer += decoder.decode();
    if (buffer) line(buffer.replace(/\r$/, ""));
    // A frame not closed by a blank line at the end of the body is dropped, as per the spec.
  }

  // ---------------------------------------------------------------- usage

  const fmt = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : "?");

  function setUsageText(text, title) {
    const u = $("usage");
    u.textContent = text;
    if (title) u.title = title;
  }

  function showUsage(meta) {
    if (!meta || typeof meta !== "object") return;
    const parts = [];
    const context = meta.tokens && meta.tokens.total_tokens;
    if (typeof context === "number") {
      const max = meta.max_tokens;
      const pct = typeof max === "number" && max > 0 ? ` (${Math.round((100 * context) / max)}%)` : "";
      parts.push(`Context ${fmt(context)} / ${fmt(max)}${pct}`);
    }
    const u = meta.usage;
    if (u && (u.prompt_tokens || u.completion_tokens)) {
      parts.push(`last call ${fmt(u.prompt_tokens)} in / ${fmt(u.completion_tokens)} out`);
    }
    if (meta.costs && typeof meta.costs.total_cost === "number") {
      parts.push(`$${meta.costs.total_cost.toFixed(4)}`);
    }
    if (parts.length) setUsageText(parts.join(" · "), pretty(meta.tokens || meta));
  }

  // ---------------------------------------------------------------- one question and its answer

  const STATUS_LABELS = {
    running: "running",
    success: "success",
    error: "error",
    no_data: "no data",
    approval_required: "approval required",
  };

  class Turn {
    constructor(question) {
      const welcome = $("welcome");
      if (welcome) welcome.remove();
      this.root = el("article", "turn");
      const user = el("div", "msg user");
      user.append(el("div", "who", "You"), el("div", "user-text", question));
      this.body = el("div", "msg assistant");
      this.body.append(el("div", "who", "triage"));
      this.progress = el("div", "progress", "Working…");
      this.root.append(user, this.body, this.progress);
      transcript().append(this.root);
      this.cards = new Map();
      this.highlights = [];
      scrollDown(true);
    }

    add(node) {
      const stick = nearBottom();
      this.body.append(node);
      if (stick) scrollDown(true);
      return node;
    }

    working(text) {
      this.progress.textContent = text;
      this.progress.hidden = false;
    }

    done() {
      this.progress.hidden = true;
    }

    notice(kind, text) {
      return this.add(el("div", `notice notice-${kind}`, text));
    }

    error(text) {
      this.cutDraft();
      const box = el("div", "notice notice-error");
      box.setAttribute("role", "alert");
      box.append(el("strong", "", "Error: "), document.createTextNode(text));
      return this.add(box);
    }

    // Text while the LLM writes it (ai_answer_delta); the ai_message or ai_answer_end that
    // follows replaces it with the rendered whole.
    delta(p) {
      if (typeof p.content !== "string") return;
      if (!this.draft) this.draft = this.add(el("div", "draft", ""));
      const stick = nearBottom();
      this.draft.append(document.createTextNode(p.content));
      if (stick) scrollDown(true);
    }

    // Text the model was writing when the request failed or was stopped stays, marked as
    // cut off.
    cutDraft() {
      if (this.draft) this.draft.classList.add("incomplete");
      this.draft = null;
    }

    dropDraft() {
      if (this.draft) this.draft.remove();
      this.draft = null;
    }

    aiMessage(p) {
      this.dropDraft();
      if (p.reasoning) {
        const d = el("details", "reasoning");
        d.append(el("summary", "", "Reasoning"), el("div", "reasoning-text", p.reasoning));
        this.add(d);
      }
      if (p.content && p.content.trim()) this.add(markdownBlock("ai-message", p.content));
    }

    card(id, name) {
      let card = this.cards.get(id);
      if (card) return card;
      const details = el("details", "tool");
      details.dataset.toolCallId = id;
      const summary = el("summary");
      const title = el("span", "tool-name", name || "tool");
      const desc = el("span", "tool-desc");
      const status = el("span", "status");
      summary.append(title, desc, status);
      const body = el("div", "tool-body");
      details.append(summary, body);
      card = { details, title, desc, status, body };
      this.cards.set(id, card);
      this.setStatus(card, "running");
      this.add(details);
      return card;
    }

    setStatus(card, status) {
      card.status.dataset.status = status;
      card.status.textContent = STATUS_LABELS[status] || status;
      card.details.dataset.status = status;
    }

    toolStart(p) {
      this.card(p.id, p.tool_name);
      this.working(`Running ${p.tool_name}…`);
    }

    toolResult(p) {
      const name = p.name || p.tool_name;
      const card = this.card(p.tool_call_id, name);
      const r = p.result || {};
      card.title.textContent = name;
      card.desc.textContent = p.description || "";
      card.desc.title = p.description || "";
      this.setStatus(card, r.status || "success");
      card.body.replaceChildren();
      const section = (label, text, cls) => {
        card.body.append(el("div", "tool-label", label), el("pre", cls, clip(text)));
      };
      if (r.params !== undefined && r.params !== null) section("Parameters", pretty(r.params), "params");
      if (r.invocation) section("Invocation", r.invocation, "invocation");
      if (r.error) section("Error", r.error, "tool-error");
      if (r.data !== undefined && r.data !== null && r.data !== "") section("Output", pretty(r.data), "output");
      else if (!r.error) card.body.append(el("div", "tool-label", "No output"));
      if (typeof r.elapsed_seconds === "number") {
        card.body.append(el("div", "tool-meta", `${r.elapsed_seconds.toFixed(2)} s`));
      }
      if (name === "highlight" && r.params && typeof r.params.text === "string") {
        // Fire-and-forget browser tool (noop mode): its arguments arrive with the result.
        this.highlights.push(r.params.text);
        highlight(r.params.text);
      }
    }

    answer(p) {
      this.dropDraft();
      if (p.analysis && p.analysis.trim()) this.add(markdownBlock("answer", p.analysis));
      else this.notice("info", "The model gave no answer text.");
      for (const text of this.highlights) highlight(text);
      const actions = Array.isArray(p.follow_up_actions) ? p.follow_up_actions : [];
      const offered = actions.filter((a) => {
        const needs = a && FOLLOW_UP_TOOLSETS[a.id];
        return !(needs && state.enabledToolsets && !state.enabledToolsets.has(needs));
      });
      if (offered.length) {
        const row = el("div", "follow-ups");
        row.append(el("span", "hint", "Follow up:"));
        for (const a of offered) {
          if (!a || !a.prompt) continue;
          const b = el("button", "secondary", a.action_label || a.prompt);
          b.type = "button";
          b.addEventListener("click", () => ask(a.prompt));
          row.append(b);
        }
        this.add(row);
      }
    }
  }

  // ---------------------------------------------------------------- browser tools

  function cellText(v) {
    if (v === null || v === undefined) return "";
    return typeof v === "object" ? JSON.stringify(v) : String(v);
  }

  function showTable(args, turn) {
    const a = args && typeof args === "object" ? args : {};
    let columns = Array.isArray(a.columns) ? a.columns.map(cellText) : [];
    let rows = Array.isArray(a.rows) ? a.rows : null;
    if (!rows) return JSON.stringify({ error: "show_table needs `rows`: a list of rows" });
    if (!columns.length && rows.length && rows[0] && typeof rows[0] === "object" && !Array.isArray(rows[0])) {
      columns = Object.keys(rows[0]);
    }
    rows = rows.map((r) =>
      Array.isArray(r) ? r : r && typeof r === "object" ? columns.map((c) => r[c]) : [r],
    );
    const width = Math.max(columns.length, ...rows.map((r) => r.length), 0);
    const figure = el("figure", "frontend-table");
    const title = typeof a.title === "string" ? a.title.trim() : "";
    if (title) figure.append(el("figcaption", "", title));
    const wrap = el("div", "table-wrap");
    const tableEl = el("table");
    const head = el("tr");
    for (let k = 0; k < width; k++) head.append(el("th", "", columns[k] ?? ""));
    const thead = el("thead");
    thead.append(head);
    const tbody = el("tbody");
    for (const r of rows) {
      const tr = el("tr");
      for (let k = 0; k < width; k++) tr.append(el("td", "", cellText(r[k])));
      tbody.append(tr);
    }
    tableEl.append(thead, tbody);
    wrap.append(tableEl);
    figure.append(wrap, el("div", "tool-meta", "Rendered by the show_table browser tool"));
    turn.add(figure);
    const named = title ? ` titled "${title}"` : "";
    const cols = columns.length ? `: ${columns.join(", ")}` : "";
    return `Rendered a table${named} in the user's console with ${rows.length} row(s) and ${width} column(s)${cols}.`;
  }

  // Marks every occurrence of `text` in answers, messages and tables, and a section whose
  // heading reads `text`. Returns how many places were marked.
  function highlight(text) {
    const needle = String(text || "").trim().toLowerCase();
    if (!needle) return 0;
    let count = 0;
    for (const h of transcript().querySelectorAll(".markdown h1, .markdown h2, .markdown h3, .markdown h4, .markdown h5, .markdown h6")) {
      if (h.textContent.trim().toLowerCase() !== needle) continue;
      h.classList.add("hl-section");
      for (let n = h.nextElementSibling; n && !/^H[1-6]$/.test(n.tagName); n = n.nextElementSibling) {
        n.classList.add("hl-section");
      }
      count++;
    }
    const roots = transcript().querySelectorAll(".markdown, .frontend-table, .user-text");
    const hits = [];
    for (const root of roots) {
      const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (node.parentElement && node.parentElement.closest("mark.hl")) continue;
        if (node.nodeValue.toLowerCase().includes(needle)) hits.push(node);
      }
    }
    for (let node of hits) {
      let at;
      while (node && (at = node.nodeValue.toLowerCase().indexOf(needle)) >= 0) {
        const match = node.splitText(at);
        const rest = match.splitText(needle.length);
        const mark = el("mark", "hl");
        match.replaceWith(mark);
        mark.append(match);
        node = rest;
        count++;
      }
    }
    const first = transcript().querySelector("mark.hl, .hl-section");
    if (first && count) first.scrollIntoView({ block: "nearest" });
    return count;
  }

  function runFrontendTool(call, turn) {
    try {
      if (call.tool_name === "show_table") return showTable(call.arguments, turn);
      return JSON.stringify({ error: `Unknown browser tool: ${call.tool_name}` });
    } catch (e) {
      return JSON.stringify({ error: `${call.tool_name} failed in the browser: ${e.message}` });
    }
  }

  // ---------------------------------------------------------------- approvals and pauses

  // Runs the paused browser tools, asks the user about pending approvals, then resumes.
  function handlePause(p, turn) {
    const history = p.conversation_history;
    const frontendResults = [];
    for (const call of p.pending_frontend_tool_calls || []) {
      const result = runFrontendTool(call, turn);
      frontendResults.push({ tool_call_id: call.tool_call_id, tool_name: call.tool_name, result });
      const card = turn.card(call.tool_call_id, call.tool_name);
      card.desc.textContent = "ran in this browser";
      turn.setStatus(card, "success");
      card.body.replaceChildren(
        el("div", "tool-label", "Arguments"),
        el("pre", "params", clip(pretty(call.arguments))),
        el("div", "tool-label", "Result sent to the model"),
        el("pre", "output", clip(result)),
      );
    }
    const approvals = p.pending_approvals || [];
    const resume = (decisions) => {
      state.paused = false;
      const body = { ask: "", conversation_history: history, enable_tool_approval: true };
      if (decisions.length) body.tool_decisions = decisions;
      if (frontendResults.length) body.frontend_tool_results = frontendResults;
      send(body, turn);
    };
    if (!approvals.length) {
      return () => resume([]);
    }
    state.paused = true;
    turn.done();
    const panel = el("section", "approval");
    panel.append(
      el("h3", "", approvals.length > 1 ? `${approvals.length} tool calls need your approval` : "A tool call needs your approval"),
    );
    const decisions = new Map();
    for (const a of approvals) {
      const item = el("div", "approval-item");
      item.dataset.toolCallId = a.tool_call_id;
      item.append(el("div", "approval-tool", a.tool_name), el("pre", "approval-desc", a.description || pretty(a.params)));
      if (a.params && Object.keys(a.params).length) {
        const d = el("details", "approval-params");
        d.append(el("summary", "", "Parameters"), el("pre", "params", pretty(a.params)));
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
        const decision = { tool_call_id: a.tool_call_id, approved };
        const text = feedback.value.trim();
        if (!approved && text) decision.feedback = text;
        decisions.set(a.tool_call_id, decision);
        approve.disabled = deny.disabled = feedback.disabled = true;
        item.dataset.decision = approved ? "approved" : "denied";
        outcome.textContent = approved ? "Approved" : text ? `Denied: ${text}` : "Denied";
        if (decisions.size === approvals.length) {
          panel.dataset.state = "sent";
          resume(approvals.map((x) => decisions.get(x.tool_call_id)));
        }
      };
      approve.addEventListener("click", () => decide(true));
      deny.addEventListener("click", () => decide(false));
      panel.append(item);
    }
    panel.dataset.state = "pending";
    turn.add(panel);
    panel.querySelector("button.approve").focus({ preventScroll: true });
    return null;
  }

  // ---------------------------------------------------------------- requests

  function setBusy(busy) {
    state.busy = busy;
    $("send").disabled = busy || state.paused;
    $("ask").disabled = state.paused;
    $("ask").placeholder = state.paused
      ? "Approve or deny the pending tool call to continue"
      : "Ask a question (Enter sends, Shift+Enter for a new line)";
    $("stop").hidden = !busy;
    $("model").disabled = busy || state.paused;
  }

  function handleEvent(turn, name, payload) {
    switch (name) {
      case "ai_answer_delta":
        turn.delta(payload);
        break;
      case "ai_message":
        turn.aiMessage(payload);
        showUsage(payload.metadata);
        break;
      case "start_tool_calling":
        turn.toolStart(payload);
        break;
      case "tool_calling_result":
        turn.toolResult(payload);
        turn.working("Working…");
        break;
      case "token_count":
        showUsage(payload.metadata);
        break;
      case "conversation_history_compaction_start":
        turn.notice("compaction", payload.content || "Compacting the conversation history…");
        turn.working("Compacting the conversation…");
        break;
      case "conversation_history_compacted": {
        const n = turn.notice("compaction", payload.content || "The conversation history was compacted.");
        if (payload.compaction_summary) {
          const d = el("details", "compaction-summary");
          d.append(el("summary", "", "Summary kept"), el("div", "reasoning-text", payload.compaction_summary));
          n.append(d);
        }
        break;
      }
      case "model_fallback":
        turn.notice("info", `Model ${payload.requested_model} unavailable; answered by ${payload.model}.`);
        break;
      case "approval_required":
        return handlePause(payload, turn);
      case "ai_answer_end":
        state.history = payload.conversation_history || state.history;
        turn.answer(payload);
        showUsage(payload.metadata);
        break;
      case "error": {
        const code = payload.error_code !== undefined ? ` (code ${payload.error_code})` : "";
        turn.error(`${payload.description || payload.msg || "unknown error"}${code}`);
        break;
      }
      default:
        break; // events this console does not know are ignored
    }
    return null;
  }

  // POSTs a chat request and renders its stream into `turn`.
  async function send(fields, turn) {
    const body = Object.assign(
      { stream: true, stream_deltas: true, enable_tool_approval: true, frontend_tools: FRONTEND_TOOLS },
      fields,
    );
    const model = $("model").value;
    if (model) body.model = model;
    const controller = new AbortController();
    state.controller = controller;
    setBusy(true);
    turn.working("Working…");
    let next = null;
    try {
      let response;
      try {
        response = await fetch("/api/chat", {
          method: "POST",
          headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
          body: JSON.stringify(body),
          signal: controller.signal,
        });
      } catch (e) {
        if (!controller.signal.aborted) turn.error(`Cannot reach the server: ${e.message}`);
        return;
      }
      if (!response.ok) {
        const detail = await errorDetail(response);
        turn.error(`HTTP ${response.status}: ${detail}`);
        if (response.status === 401) {
          state.retry = () => send(fields, turn);
          showKeyPanel(
            apiKey()
              ? "The API key was refused. Enter another one to send the question again."
              : "This server requires an API key. Enter it to send the question.",
          );
        }
        return;
      }
      const type = response.headers.get("content-type") || "";
      if (!type.startsWith("text/event-stream")) {
        turn.error(`Expected an event stream, got ${type || "no content type"}`);
        return;
      }
      let ended = false;
      try {
        await readEvents(response.body, (name, data) => {
          let payload;
          try {
            payload = JSON.parse(data);
          } catch {
            turn.error(`Could not read the ${name} event`);
            return;
          }
          if (TERMINAL_EVENTS.has(name)) ended = true;
          next = handleEvent(turn, name, payload) || next;
        });
      } catch (e) {
        if (!controller.signal.aborted) turn.error(`The stream broke off: ${e.message}`);
      }
      if (controller.signal.aborted) {
        turn.cutDraft();
        turn.notice("info", "Stopped.");
      }
      else if (!ended) turn.error("The stream ended before the answer was complete.");
    } finally {
      if (state.controller === controller) state.controller = null;
      if (!next) turn.done();
      setBusy(false);
    }
    if (next) next(); // a browser-tool pause resumes at once
  }

  function ask(question) {
    const text = String(question || "").trim();
    if (!text || state.busy || state.paused) return;
    const turn = new Turn(text);
    const fields = { ask: text };
    if (state.history) fields.conversation_history = state.history;
    send(fields, turn);
  }

  // ---------------------------------------------------------------- wiring

  function init() {
    $("ask-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const box = $("ask");
      const text = box.value;
      if (!text.trim() || state.busy || state.paused) return;
      box.value = "";
      ask(text);
    });
    $("ask").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        $("ask-form").requestSubmit();
      }
    });
    $("stop").addEventListener("click", () => {
      if (state.controller) state.controller.abort();
    });
    $("new-chat").addEventListener("click", () => {
      if (state.controller) state.controller.abort();
      state.history = null;
      state.paused = false;
      transcript().replaceChildren();
      setUsageText("No tokens used yet", "Token usage reported by the server");
      setBusy(false);
      $("ask").focus();
    });
    $("key-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const key = $("api-key").value.trim();
      if (!key) return;
      try {
        sessionStorage.setItem(KEY_STORAGE, key);
      } catch {
        // storage disabled: the key is lost on reload
      }
      $("api-key").value = "";
      $("key-panel").hidden = true;
      $("forget-key").hidden = false;
      loadModels();
      const retry = state.retry;
      state.retry = null;
      if (retry) retry();
    });
    $("forget-key").addEventListener("click", () => {
      try {
        sessionStorage.removeItem(KEY_STORAGE);
      } catch {
        // nothing stored
      }
      $("forget-key").hidden = true;
      loadModels();
    });
    $("forget-key").hidden = !apiKey();
    setBusy(false);
    checkReady();
    loadModels();
    loadToolsets();
    $("ask").focus();
  }

  // Exposed for tests and for the curious: the renderer is a pure function.
  window.triageConsole = { renderMarkdown, highlight };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
