// SPDX-License-Identifier: Apache-2.0
// The web chat of `afm chat --web`. Everything from the history or a model is put into the page as text nodes
// (never as HTML), so no message can run script; the Content-Security-Policy forbids inline and foreign code anyway.
"use strict";

const $ = (id) => document.getElementById(id);
const HIGHLIGHT_OPEN = "\uE000";
const HIGHLIGHT_CLOSE = "\uE001";
const PAGE = 50;
const MESSAGE_PAGE = 60;

const state = {
  conversations: [], total: 0, offset: 0,
  current: null,          // the open conversation (summary) or null for a new one
  messages: [], hasEarlier: false,
  attachments: [],        // images stored for the next message: {hash, width, height, mime_type}
  streaming: null,        // {answerId, conversationId}
  searching: false,
  draftTimer: null, searchTimer: null, pollTimer: null,
};

// MARK: - API

async function api(method, path, body) {
  const options = { method, headers: {} };
  if (method !== "GET") {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body ?? {});
  }
  const response = await fetch(path, options);
  if (!response.ok) {
    let message = `HTTP ${response.status}`;
    try { message = (await response.json()).error.message; } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return response.json();
}

function showError(error) {
  const box = $("error");
  if (!error) { box.hidden = true; box.textContent = ""; return; }
  box.textContent = error.message ?? String(error);
  box.hidden = false;
}

// MARK: - Markdown (to DOM nodes; text only ever as text)

function inline(text, parent) {
  const pattern = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*)|(\[[^\]]+\]\([^)\s]+\))/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) parent.append(text.slice(last, match.index));
    const token = match[0];
    if (match[1]) {
      const code = document.createElement("code");
      code.textContent = token.slice(1, -1);
      parent.append(code);
    } else if (match[2]) {
      const strong = document.createElement("strong");
      inline(token.slice(2, -2), strong);
      parent.append(strong);
    } else if (match[3]) {
      const em = document.createElement("em");
      inline(token.slice(1, -1), em);
      parent.append(em);
    } else {
      const close = token.indexOf("](");
      const label = token.slice(1, close);
      const url = token.slice(close + 2, -1);
      if (/^https?:\/\//i.test(url)) {
        const link = document.createElement("a");
        link.href = url;
        link.rel = "noopener noreferrer";
        link.target = "_blank";
        link.textContent = label;
        parent.append(link);
      } else {
        parent.append(label);
      }
    }
    last = match.index + token.length;
  }
  if (last < text.length) parent.append(text.slice(last));
}

function tableCells(line) {
  let text = line.trim();
  if (text.startsWith("|")) text = text.slice(1);
  if (text.endsWith("|")) text = text.slice(0, -1);
  return text.split("|").map((cell) => cell.trim());
}

function copyText(text, button) {
  const done = () => { button.textContent = "Copied"; setTimeout(() => { button.textContent = "Copy"; }, 1500); };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, () => fallbackCopy(text, done));
  } else {
    fallbackCopy(text, done);
  }
}

function fallbackCopy(text, done) {
  const area = document.createElement("textarea");
  area.value = text;
  document.body.append(area);
  area.select();
  try { document.execCommand("copy"); done(); } finally { area.remove(); }
}

function renderMarkdown(source, container) {
  container.replaceChildren();
  const lines = source.split("\n");
  let index = 0;
  let paragraph = [];
  const flushParagraph = () => {
    if (!paragraph.length) return;
    const p = document.createElement("p");
    paragraph.forEach((line, i) => { if (i) p.append(document.createElement("br")); inline(line, p); });
    container.append(p);
    paragraph = [];
  };
  while (index < lines.length) {
    const line = lines[index];
    const fence = line.match(/^\s*(```|~~~)\s*([\w+#.-]*)/);
    if (fence) {
      flushParagraph();
      const code = [];
      index += 1;
      while (index < lines.length && !lines[index].trim().startsWith(fence[1])) { code.push(lines[index]); index += 1; }
      index += 1;
      const block = document.createElement("div");
      block.className = "codeblock";
      const head = document.createElement("div");
      head.className = "code-head";
      const language = document.createElement("span");
      language.textContent = fence[2] || "code";
      const copy = document.createElement("button");
      copy.type = "button";
      copy.className = "copy";
      copy.textContent = "Copy";
      const text = code.join("\n");
      copy.addEventListener("click", () => copyText(text, copy));
      head.append(language, copy);
      const pre = document.createElement("pre");
      const codeElement = document.createElement("code");
      codeElement.textContent = text;
      pre.append(codeElement);
      block.append(head, pre);
      container.append(block);
      continue;
    }
    if (/^\s*\|/.test(line) && index + 1 < lines.length && /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/.test(lines[index + 1])) {
      flushParagraph();
      const table = document.createElement("table");
      const headRow = document.createElement("tr");
      for (const cell of tableCells(line)) { const th = document.createElement("th"); inline(cell, th); headRow.append(th); }
      const thead = document.createElement("thead");
      thead.append(headRow);
      const tbody = document.createElement("tbody");
      index += 2;
      while (index < lines.length && /^\s*\|/.test(lines[index])) {
        const row = document.createElement("tr");
        for (const cell of tableCells(lines[index])) { const td = document.createElement("td"); inline(cell, td); row.append(td); }
        tbody.append(row);
        index += 1;
      }
      table.append(thead, tbody);
      container.append(table);
      continue;
    }
    const heading = line.match(/^\s*(#{1,6})\s+(.*)$/);
    if (heading) {
      flushParagraph();
      const h = document.createElement(`h${Math.min(6, heading[1].length + 2)}`);
      inline(heading[2], h);
      container.append(h);
      index += 1;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flushParagraph();
      container.append(document.createElement("hr"));
      index += 1;
      continue;
    }
    const item = line.match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
    if (item) {
      flushParagraph();
      const ordered = /\d/.test(item[1]);
      const list = document.createElement(ordered ? "ol" : "ul");
      while (index < lines.length) {
        const next = lines[index].match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
        if (!next || /\d/.test(next[1]) !== ordered) break;
        const li = document.createElement("li");
        inline(next[2], li);
        list.append(li);
        index += 1;
      }
      container.append(list);
      continue;
    }
    if (/^\s*>/.test(line)) {
      flushParagraph();
      const quote = [];
      while (index < lines.length && /^\s*>/.test(lines[index])) { quote.push(lines[index].replace(/^\s*>\s?/, "")); index += 1; }
      const blockquote = document.createElement("blockquote");
      renderMarkdown(quote.join("\n"), blockquote);
      container.append(blockquote);
      continue;
    }
    if (!line.trim()) { flushParagraph(); index += 1; continue; }
    paragraph.push(line);
    index += 1;
  }
  flushParagraph();
}

// MARK: - Sidebar

function highlighted(text, words) {
  // Search snippets carry their matches between U+E000 and U+E001; titles are marked by the query's words.
  const fragment = document.createDocumentFragment();
  if (text.includes(HIGHLIGHT_OPEN)) {
    for (const [i, piece] of text.split(new RegExp(`[${HIGHLIGHT_OPEN}${HIGHLIGHT_CLOSE}]`)).entries()) {
      if (i % 2) { const mark = document.createElement("mark"); mark.textContent = piece; fragment.append(mark); }
      else fragment.append(piece);
    }
    return fragment;
  }
  const escaped = words.filter(Boolean).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  if (!escaped.length) { fragment.append(text); return fragment; }
  const pattern = new RegExp(`(${escaped.join("|")})`, "gi");
  for (const [i, piece] of text.split(pattern).entries()) {
    if (i % 2) { const mark = document.createElement("mark"); mark.textContent = piece; fragment.append(mark); }
    else fragment.append(piece);
  }
  return fragment;
}

function conversationItem(id, title, detail, words) {
  const li = document.createElement("li");
  li.dataset.id = id;
  if (state.current && state.current.id === id) li.className = "current";
  const titleSpan = document.createElement("span");
  titleSpan.className = "conv-title";
  titleSpan.append(highlighted(title || "(untitled)", words));
  const detailSpan = document.createElement("span");
  detailSpan.className = "conv-preview";
  detailSpan.append(highlighted(detail, words));
  li.append(titleSpan, detailSpan);
  li.addEventListener("click", () => openConversation(id));
  return li;
}

function renderSidebar() {
  if (state.searching) return;
  const list = $("conversations");
  list.replaceChildren(...state.conversations.map((c) => conversationItem(c.id, c.title, c.preview, [])));
  $("more-conversations").hidden = state.conversations.length >= state.total;
  $("conversation-count").textContent = `${state.conversations.length} of ${state.total} conversations`;
}

async function loadConversations(more = false) {
  const offset = more ? state.conversations.length : 0;
  const limit = more ? PAGE : Math.max(PAGE, state.conversations.length);
  const page = await api("GET", `/api/conversations?offset=${offset}&limit=${limit}`);
  state.conversations = more ? state.conversations.concat(page.conversations) : page.conversations;
  state.total = page.total;
  renderSidebar();
}

async function search(text) {
  const words = text.trim().split(/\s+/).filter(Boolean);
  if (!words.length) { state.searching = false; renderSidebar(); return; }
  state.searching = true;
  const result = await api("GET", `/api/search?q=${encodeURIComponent(text)}`);
  if ($("search").value !== text) return;  // a newer query is on its way
  const list = $("conversations");
  list.replaceChildren(...result.hits.map((hit) => conversationItem(hit.conversation_id, hit.title, hit.snippet, words)));
  $("more-conversations").hidden = true;
  $("conversation-count").textContent = `${result.hits.length} match${result.hits.length === 1 ? "" : "es"}`;
}

// MARK: - Messages

function messageElement(message) {
  const element = document.createElement("article");
  element.className = `message ${message.author}`;
  element.dataset.id = message.id;
  element.dataset.sequence = message.sequence;
  element.dataset.state = message.state;
  const who = document.createElement("div");
  who.className = "who";
  const name = document.createElement("span");
  name.className = "name";
  name.textContent = message.author === "user" ? "you" : (message.model || "assistant");
  who.append(name);
  if (message.author === "assistant" && message.state !== "pending") {
    // The whole answer as plain text, as /copy does in the terminal.
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "copy-answer";
    copy.textContent = "Copy";
    copy.addEventListener("click", () => copyText(message.text, copy));
    who.append(copy);
  }
  const body = document.createElement("div");
  body.className = "body";
  if (message.author === "assistant") {
    renderMarkdown(message.text, body);
    if (message.state === "pending") body.classList.add("cursor");
  } else {
    const text = document.createElement("div");
    text.className = "text";
    text.textContent = message.text;
    body.append(text);
  }
  for (const image of message.images || []) {
    const img = document.createElement("img");
    img.className = "attached";
    img.alt = `image ${image.width}×${image.height}`;
    img.src = `/api/images/${image.hash}`;
    body.append(img);
  }
  element.append(who, body);
  if (message.notice) {
    const notice = document.createElement("div");
    notice.className = "notice";
    notice.textContent = message.notice;
    element.append(notice);
  }
  if (message.author === "assistant" && ["interrupted", "failed", "incomplete"].includes(message.state)) {
    const line = document.createElement("div");
    line.className = "state";
    line.append(`[${message.state}]`);
    const isLast = state.messages.length && state.messages[state.messages.length - 1].id === message.id;
    if (isLast && !state.streaming) {
      const retry = document.createElement("button");
      retry.type = "button";
      retry.className = "retry";
      retry.textContent = "Retry";
      retry.addEventListener("click", () => runTurn("retry", {}));
      line.append(retry);
    }
    element.append(line);
  }
  if (message.usage) {
    const usage = document.createElement("div");
    usage.className = "usage";
    usage.textContent = `${message.usage.input_tokens} input · ${message.usage.output_tokens} output tokens`;
    element.append(usage);
  }
  return element;
}

function renderMessages(keepScroll = false) {
  const pane = $("messages");
  const fromBottom = pane.scrollHeight - pane.scrollTop;
  $("message-list").replaceChildren(...state.messages.map(messageElement));
  $("load-earlier").hidden = !state.hasEarlier;
  pane.scrollTop = keepScroll ? pane.scrollHeight - fromBottom : pane.scrollHeight;
  schedulePendingPoll();
}

function replaceMessage(message) {
  const index = state.messages.findIndex((m) => m.id === message.id);
  if (index >= 0) state.messages[index] = message; else state.messages.push(message);
}

/// Answers streamed by another process (the terminal chat) or by a turn this page left: followed from the history.
function schedulePendingPoll() {
  clearTimeout(state.pollTimer);
  const pending = state.messages.some((m) => m.state === "pending");
  if (!pending || state.streaming || !state.current) return;
  state.pollTimer = setTimeout(async () => {
    if (!state.current || state.streaming) return;
    const id = state.current.id;
    const limit = Math.min(200, Math.max(MESSAGE_PAGE, state.messages.length));
    try {
      const page = await api("GET", `/api/conversations/${encodeURIComponent(id)}/messages?limit=${limit}`);
      if (state.current && state.current.id === id && !state.streaming) {
        state.messages = page.messages;
        state.hasEarlier = page.has_earlier;
        renderMessages();
      }
    } catch (error) { showError(error); }
  }, 1000);
}

async function loadEarlier() {
  if (!state.current || !state.messages.length) return;
  const first = state.messages[0].sequence;
  const page = await api("GET", `/api/conversations/${encodeURIComponent(state.current.id)}/messages?before=${first}&limit=${MESSAGE_PAGE}`);
  state.messages = page.messages.concat(state.messages);
  state.hasEarlier = page.has_earlier;
  renderMessages(true);
}

// MARK: - Conversations

function setTitle() {
  $("title").textContent = state.current ? (state.current.title || "(untitled)") : "New conversation";
  $("rename").disabled = !state.current;
  $("delete").disabled = !state.current;
  document.title = state.current ? `${state.current.title || "(untitled)"} — afm chat` : "afm chat";
  for (const li of $("conversations").children) li.classList.toggle("current", !!state.current && li.dataset.id === state.current.id);
}

async function openConversation(id, { updateHash = true } = {}) {
  showError(null);
  await flushDraft();
  try {
    const conversation = await api("GET", `/api/conversations/${encodeURIComponent(id)}`);
    const page = await api("GET", `/api/conversations/${encodeURIComponent(id)}/messages?limit=${MESSAGE_PAGE}`);
    state.current = conversation;
    state.messages = page.messages;
    state.hasEarlier = page.has_earlier;
    $("input").value = conversation.draft;
    if (updateHash) history.replaceState(null, "", `#/c/${encodeURIComponent(id)}`);
    setTitle();
    renderMessages();
  } catch (error) {
    showError(error);
    await newConversation();
  }
}

async function newConversation() {
  await flushDraft();
  state.current = null;
  state.messages = [];
  state.hasEarlier = false;
  history.replaceState(null, "", "#/");
  setTitle();
  renderMessages();
  try { $("input").value = (await api("GET", "/api/draft")).text; } catch (error) { showError(error); }
}

// MARK: - Drafts

function draftPath() {
  return state.current ? `/api/conversations/${encodeURIComponent(state.current.id)}/draft` : "/api/draft";
}

function scheduleDraft() {
  clearTimeout(state.draftTimer);
  const path = draftPath();
  const text = $("input").value;
  state.draftTimer = setTimeout(() => { state.draftTimer = null; saveDraft(path, text); }, 400);
  state.pendingDraft = { path, text };
}

async function saveDraft(path, text) {
  state.pendingDraft = null;
  $("status").textContent = "saving draft…";
  try { await api("PUT", path, { text }); $("status").textContent = "draft saved"; }
  catch (error) { $("status").textContent = ""; showError(error); }
}

async function flushDraft() {
  if (!state.draftTimer || !state.pendingDraft) return;
  clearTimeout(state.draftTimer);
  state.draftTimer = null;
  await saveDraft(state.pendingDraft.path, state.pendingDraft.text);
}

// MARK: - Images

function renderAttachments() {
  const box = $("attachments");
  box.replaceChildren(...state.attachments.map((image, index) => {
    const wrapper = document.createElement("div");
    wrapper.className = "attachment";
    const img = document.createElement("img");
    img.src = `/api/images/${image.hash}`;
    img.alt = `attached image ${image.width}×${image.height}`;
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "×";
    remove.title = "Remove";
    remove.addEventListener("click", () => { state.attachments.splice(index, 1); renderAttachments(); });
    wrapper.append(img, remove);
    return wrapper;
  }));
}

async function attachFiles(files) {
  showError(null);
  for (const file of files) {
    if (!file.type.startsWith("image/")) continue;
    if (state.attachments.length >= 4) { showError(new Error("At most 4 images per message.")); break; }
    $("status").textContent = `attaching ${file.name || "image"}…`;
    try {
      const data = await new Promise((resolve, reject) => {
        const reader = new FileReader();
        reader.onload = () => resolve(reader.result);
        reader.onerror = () => reject(reader.error);
        reader.readAsDataURL(file);
      });
      const image = await api("POST", "/api/images", { data });
      state.attachments.push(image);
      renderAttachments();
      $("status").textContent = `attached ${image.width}×${image.height} ${image.mime_type}`;
    } catch (error) {
      $("status").textContent = "";
      showError(error);
    }
  }
}

// MARK: - Sending

function setStreaming(streaming) {
  state.streaming = streaming;
  $("stop").hidden = !streaming;
  $("send").disabled = !!streaming;
}

async function send() {
  const text = $("input").value;
  if (state.streaming || (!text.trim() && !state.attachments.length)) return;
  showError(null);
  try {
    if (!state.current) {
      const created = await api("POST", "/api/conversations", {});
      state.current = created;
      history.replaceState(null, "", `#/c/${encodeURIComponent(created.id)}`);
      setTitle();
      await api("PUT", "/api/draft", { text: "" });
    }
  } catch (error) { showError(error); return; }
  clearTimeout(state.draftTimer);
  state.draftTimer = null;
  const images = state.attachments.map((image) => image.hash);
  $("input").value = "";
  state.attachments = [];
  renderAttachments();
  const ok = await runTurn("messages", { text, images });
  if (!ok) { $("input").value = text; scheduleDraft(); }
}

/// Posts a question (or a retry) and follows the answer's events; returns whether the turn was stored.
async function runTurn(kind, body) {
  if (!state.current || state.streaming) return false;
  const conversationId = state.current.id;
  const model = $("model").value;
  setStreaming({ answerId: null, conversationId });
  let stored = false;
  try {
    const response = await fetch(`/api/conversations/${encodeURIComponent(conversationId)}/${kind}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body, model }),
    });
    if (!response.ok) {
      let message = `HTTP ${response.status}`;
      try { message = (await response.json()).error.message; } catch (_) { /* not JSON */ }
      throw new Error(message);
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let answer = null;
    let frame = 0;
    const paint = () => {
      frame = 0;
      if (!answer || !state.current || state.current.id !== conversationId) return;
      const element = document.querySelector(`article[data-id="${answer.id}"] .body`);
      if (!element) return;
      const pane = $("messages");
      const atBottom = pane.scrollHeight - pane.scrollTop - pane.clientHeight < 40;
      renderMarkdown(answer.text, element);
      if (atBottom) pane.scrollTop = pane.scrollHeight;
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const chunk = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = chunk.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (!data) continue;
        const event = JSON.parse(data);
        if (event.type === "turn") {
          stored = true;
          answer = event.answer;
          state.streaming.answerId = answer.id;
          if (state.current && state.current.id === conversationId) {
            replaceMessage(event.user);
            replaceMessage(answer);
            renderMessages();
          }
        } else if (event.type === "notice" && answer) {
          answer.notice = event.text;
          const element = document.querySelector(`article[data-id="${answer.id}"]`);
          if (element && !element.querySelector(".notice")) {
            const notice = document.createElement("div");
            notice.className = "notice";
            notice.textContent = event.text;
            element.append(notice);
          }
        } else if (event.type === "model" && answer) {
          answer.model = event.model;
          const who = document.querySelector(`article[data-id="${answer.id}"] .who .name`);
          if (who) who.textContent = event.model;
        } else if (event.type === "delta" && answer) {
          answer.text += event.text;
          if (!frame) frame = requestAnimationFrame(paint);
        } else if (event.type === "done") {
          if (event.answer) answer = event.answer;
        }
      }
    }
    setStreaming(null);
    if (answer && state.current && state.current.id === conversationId) {
      replaceMessage(answer);
      renderMessages();
    }
  } catch (error) {
    setStreaming(null);
    showError(error);
    renderMessages();
  }
  try {
    state.searching = false;
    $("search").value = "";
    await loadConversations();
    if (state.current && state.current.id === conversationId) {
      const fresh = state.conversations.find((c) => c.id === conversationId);
      if (fresh) { state.current = fresh; setTitle(); }
    }
  } catch (error) { showError(error); }
  return stored;
}

async function stop() {
  if (!state.streaming || !state.streaming.answerId) return;
  try { await api("POST", `/api/answers/${encodeURIComponent(state.streaming.answerId)}/stop`, {}); }
  catch (error) { showError(error); }
}

// MARK: - Rename and delete

function openRename() {
  if (!state.current) return;
  $("rename-input").value = state.current.title;
  $("rename-dialog").showModal();
  $("rename-input").select();
}

async function confirmRename() {
  const title = $("rename-input").value.trim();
  if (!title || !state.current) return;
  try {
    await api("POST", `/api/conversations/${encodeURIComponent(state.current.id)}/rename`, { title });
    $("rename-dialog").close();
    state.current.title = title;
    setTitle();
    await loadConversations();
  } catch (error) { showError(error); }
}

function openDelete() {
  if (!state.current) return;
  const count = state.current.message_count;
  $("delete-text").textContent = `Delete “${state.current.title || "(untitled)"}” and its ${count} message${count === 1 ? "" : "s"}? This cannot be undone.`;
  $("delete-dialog").showModal();
}

async function confirmDelete() {
  if (!state.current) return;
  try {
    await api("DELETE", `/api/conversations/${encodeURIComponent(state.current.id)}`, {});
    $("delete-dialog").close();
    state.current = null;
    await newConversation();
    await loadConversations();
  } catch (error) { showError(error); }
}

// MARK: - Models

async function loadModels() {
  const select = $("model");
  try {
    const { models } = await api("GET", "/api/models");
    select.replaceChildren(...models.map((id) => { const option = document.createElement("option"); option.value = id; option.textContent = id; return option; }));
    const saved = localStorage.getItem("afm.model");
    if (saved && models.includes(saved)) select.value = saved;
  } catch (error) {
    showError(new Error(`Cannot list the gateway's models: ${error.message}`));
  }
}

// MARK: - Start

function route() {
  const match = location.hash.match(/^#\/c\/(.+)$/);
  if (match) return openConversation(decodeURIComponent(match[1]), { updateHash: false });
  return newConversation();
}

function bind() {
  $("new-chat").addEventListener("click", () => newConversation());
  $("more-conversations").addEventListener("click", () => loadConversations(true).catch(showError));
  $("load-earlier").addEventListener("click", () => loadEarlier().catch(showError));
  $("send").addEventListener("click", () => send());
  $("stop").addEventListener("click", () => stop());
  $("rename").addEventListener("click", openRename);
  $("rename-ok").addEventListener("click", confirmRename);
  $("rename-cancel").addEventListener("click", () => $("rename-dialog").close());
  $("rename-input").addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); confirmRename(); } });
  $("delete").addEventListener("click", openDelete);
  $("delete-ok").addEventListener("click", confirmDelete);
  $("delete-cancel").addEventListener("click", () => $("delete-dialog").close());
  $("model").addEventListener("change", () => localStorage.setItem("afm.model", $("model").value));
  $("search").addEventListener("input", () => {
    clearTimeout(state.searchTimer);
    const text = $("search").value;
    state.searchTimer = setTimeout(() => search(text).catch(showError), 250);
  });
  const input = $("input");
  input.addEventListener("input", scheduleDraft);
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); send(); }
  });
  input.addEventListener("paste", (event) => {
    const files = [...(event.clipboardData?.files || [])].filter((f) => f.type.startsWith("image/"));
    if (files.length) { event.preventDefault(); attachFiles(files); }
  });
  $("file").addEventListener("change", (event) => { attachFiles([...event.target.files]); event.target.value = ""; });
  const composer = $("composer");
  for (const target of [composer, $("messages")]) {
    target.addEventListener("dragover", (event) => { event.preventDefault(); composer.classList.add("dragging"); });
    target.addEventListener("dragleave", () => composer.classList.remove("dragging"));
    target.addEventListener("drop", (event) => {
      event.preventDefault();
      composer.classList.remove("dragging");
      attachFiles([...(event.dataTransfer?.files || [])]);
    });
  }
  window.addEventListener("hashchange", () => route());
  window.addEventListener("beforeunload", () => {
    if (state.pendingDraft) {
      // A draft typed in the last 400 ms: sent as the page goes (fetch keepalive survives the unload).
      fetch(state.pendingDraft.path, { method: "PUT", keepalive: true, headers: { "Content-Type": "application/json" }, body: JSON.stringify({ text: state.pendingDraft.text }) });
    }
  });
}

document.addEventListener("DOMContentLoaded", async () => {
  bind();
  await Promise.all([loadModels(), loadConversations().catch(showError)]);
  await route();
  document.body.dataset.ready = "true";
});
