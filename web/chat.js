// The chat view: conversations (list with search, rename, delete with undo, new, export and
// import), a system prompt per conversation, and streamed answers. An answer keeps running while
// another conversation is open (it is only stopped by Stop or by deleting its conversation), is
// drawn block by block, and the view follows it only while the reader is at the bottom. Every
// message can be edited or deleted, every answer regenerated; both keep the alternatives as
// branches. Screen readers hear an answer once, when it is finished (the message list is not a
// live region: it changes every token).
import { ApiError, stream } from './api.js';
import { attachments, checkFits, clearComposer, composerNote, contentWithAttachments, drawMeter, exactCount, initComposer } from './composer.js';
import { noteSent, prefillProgress, queuePosition, setBusy, thisPagesRequest } from './figures.js';
import { actionButton, editInPlace, fillBranch, fillMessage, messageElement } from './messages.js';
import { copyText } from './markdown.js';
import { generationParams } from './settings.js';
import { conversations, openStore, settings } from './store.js';
import { addNode, createConversation, deleteNode, pathOf, showBranch, siblingsOf, touch } from './tree.js';

const $ = (id) => document.getElementById(id);

let app = null;              // {canSend(), onAuthError(), modelId()}
let current = null;          // the open conversation
const running = new Map();   // conversation id -> {controller, node, view}
let views = new Map();       // node id -> its view, for the open conversation
let undo = null;             // the last deleted conversation
let stick = true;            // the reader is at the bottom of the messages: follow new text

export function chatBusy() { return running.has(current && current.id); }

function announce(text) {
  $('announcer').textContent = text;
}

// --- conversation list ----------------------------------------------------------------------

function titleOf(text) {
  const line = text.trim().split('\n')[0];
  return line.length > 48 ? line.slice(0, 47) + '…' : line || 'New conversation';
}

function matches(c, query) {
  if (!query) return true;
  const q = query.toLowerCase();
  if (c.title.toLowerCase().includes(q) || (c.system || '').toLowerCase().includes(q)) return true;
  return Object.values(c.nodes).some((n) => !n.deleted && (n.content || '').toLowerCase().includes(q));
}

function renderList() {
  const list = $('conversation-list');
  const query = $('conversation-search').value.trim();
  list.textContent = '';
  const shown = conversations.all().filter((c) => matches(c, query));
  for (const c of shown) {
    const li = document.createElement('li');
    li.dataset.id = c.id;
    const open = document.createElement('button');
    open.type = 'button';
    open.className = 'open';
    open.textContent = c.title;
    open.title = c.title + (running.has(c.id) ? ' (answering)' : '');
    if (running.has(c.id)) open.classList.add('answering');
    if (current && c.id === current.id) open.setAttribute('aria-current', 'true');
    open.addEventListener('click', () => openConversation(c.id));
    const rename = smallButton('✎', 'Rename “' + c.title + '”', () => startRename(li, c));
    rename.classList.add('rename');
    const remove = smallButton('✕', 'Delete “' + c.title + '”', () => deleteConversation(c.id));
    remove.classList.add('delete');
    li.append(open, rename, remove);
    list.append(li);
  }
  $('search-count').textContent = query ? shown.length + ' of ' + conversations.all().length + ' conversations' : '';
}

function focusListItem(id) {
  const b = $('conversation-list').querySelector('li[data-id="' + id + '"] .open');
  if (b) b.focus();
}

function smallButton(text, label, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'icon small';
  b.textContent = text;
  b.setAttribute('aria-label', label);
  b.title = label;
  b.addEventListener('click', onClick);
  return b;
}

function startRename(li, c) {
  const input = document.createElement('input');
  input.value = c.title;
  input.className = 'rename-input';
  input.setAttribute('aria-label', 'New name of the conversation');
  li.replaceChildren(input);
  input.focus();
  input.select();
  let done = false;
  const finish = (keep) => {
    if (done) return;
    done = true;
    const fresh = conversations.get(c.id);
    if (keep && fresh && input.value.trim()) {
      fresh.title = input.value.trim();
      fresh.renamed = true;
      fresh.metaUpdated = Date.now();
      conversations.put(fresh);
    }
    renderList();
    focusListItem(c.id);  // focus stays where the reader was, not on the page's top
  };
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') finish(true);
    if (e.key === 'Escape') { e.stopPropagation(); finish(false); }
  });
  input.addEventListener('blur', () => finish(true));
}

async function deleteConversation(id) {
  const run = running.get(id);
  if (run) run.controller.abort();
  const removed = await conversations.remove(id);
  if (!removed) return;
  undo = removed;
  if (current && current.id === id) {
    const next = conversations.all()[0];
    if (next) openConversation(next.id); else newConversation({ focus: false });
  }
  renderList();
  $('toast-text').textContent = 'Deleted “' + removed.title + '”.';
  $('toast-undo').hidden = false;
  $('toast').hidden = false;
  $('toast-undo').focus();  // the deleted item's place: Undo is the next thing one may want
  clearTimeout(deleteConversation.timer);
  deleteConversation.timer = setTimeout(() => {
    const hadFocus = $('toast').contains(document.activeElement);
    $('toast').hidden = true;
    undo = null;
    if (hadFocus && current) focusListItem(current.id);
  }, 8000);
}

async function undoDelete() {
  if (!undo) return;
  const c = undo;
  undo = null;
  $('toast').hidden = true;
  await conversations.restore(c);
  openConversation(c.id);
  focusListItem(c.id);
}

export function newConversation({ focus = true } = {}) {
  // An empty conversation is reused rather than piling up.
  const empty = conversations.all().find((c) => !c.leaf && !c.system && !running.has(c.id));
  current = empty || createConversation();
  if (!empty) conversations.put(current);
  conversations.setCurrent(current.id);
  showConversation();
  if (focus) $('input').focus();
}

function openConversation(id) {
  document.body.classList.remove('show-conversations');
  $('toggle-conversations').setAttribute('aria-expanded', 'false');
  if (current && current.id === id) return;
  current = conversations.get(id);
  conversations.setCurrent(id);
  showConversation();
}

function save(c = current) {
  if (!c.renamed) {
    const first = pathOf(c).find((m) => m.role === 'user');
    if (first) c.title = titleOf(first.content);
  }
  const done = conversations.put(c);
  renderList();
  return done;
}

// --- messages -------------------------------------------------------------------------------

function atBottom(box) {
  return box.scrollHeight - box.scrollTop - box.clientHeight < 24;
}

function followIfAtBottom() {
  const box = $('messages');
  if (stick && settings.display().autoScroll) box.scrollTop = box.scrollHeight;
}

// The prompt tokens of the open branch so far: the last answer's own count (usage), then each
// later message by the server's count made while it was written, else an estimate.
function tokensOf(m) {
  const text = contentWithAttachments(m.content, m.attachments);
  return m.tokens && m.tokens.text === text ? m.tokens.count : Math.ceil(text.length / 3);
}

function tokensSoFar() {
  if (!current) return 0;
  const path = pathOf(current);
  for (let i = path.length - 1; i >= 0; i--) {
    const s = path[i].stats;
    if (s && s.prompt_tokens !== undefined) {
      let n = s.prompt_tokens + (s.completion_tokens || 0);
      for (const m of path.slice(i + 1)) n += tokensOf(m);
      return n;
    }
  }
  return path.reduce((n, m) => n + tokensOf(m), 0);
}

function showConversation() {
  $('system-prompt').value = current.system || '';
  $('system-summary').textContent = current.system ? '(set)' : '';
  const box = $('messages');
  box.textContent = '';
  views = new Map();
  const run = running.get(current.id);
  for (const node of pathOf(current)) {
    const view = messageElement(node);
    views.set(node.id, view);
    const streaming = run && run.node.id === node.id;
    fillMessage(view, node, { streaming });
    if (streaming) { run.view = view; markStreaming(view); }
    box.append(view.root);
  }
  if (run && !views.has(run.node.id)) run.view = null;
  updateActions();
  renderList();
  setButtons();
  drawMeter();
  // A conversation opens at its end, where one continues it.
  stick = true;
  box.scrollTop = box.scrollHeight;
}

function markStreaming(view) {
  view.root.dataset.state = 'streaming';
  view.root.setAttribute('aria-busy', 'true');
  view.state.textContent = 'generating…';
}

// The actions and branch switchers of every message on screen.
function updateActions() {
  const busy = running.has(current.id);
  for (const node of pathOf(current)) {
    const view = views.get(node.id);
    if (!view) continue;
    const sibs = siblingsOf(current, node);
    fillBranch(view, sibs.findIndex((s) => s.id === node.id), sibs.length, (i) => {
      if (busy) return;
      showBranch(current, sibs[i].id);
      save();
      showConversation();
    });
    for (const b of view.branch.querySelectorAll('button')) if (busy) b.disabled = true;
    view.actions.textContent = '';
    if (node.role === 'assistant' && node.content) {
      view.actions.append(actionButton('Copy', 'Copy the answer', async (b) => {
        b.textContent = (await copyText(node.content)) ? 'Copied' : 'Copy failed';
        setTimeout(() => { b.textContent = 'Copy'; }, 1500);
      }, 'copy'));
    }
    if (busy) continue;
    view.actions.append(actionButton('Edit', node.role === 'user' ? 'Edit this message (a new version is sent)'
      : 'Edit this answer (kept as a new version)', () => editMessage(node), 'edit'));
    if (node.role === 'assistant' && node.content && (node.stopped || (node.stats && node.stats.finish_reason === 'length'))) {
      view.actions.append(actionButton('Continue', 'Continue this answer where it ' + (node.stopped ? 'was stopped' : 'was cut off'),
        () => continueNode(node), 'continue'));
    }
    if (node.role === 'assistant') {
      view.actions.append(actionButton('Regenerate', 'Regenerate this answer (Alt+R for the last one)', () => regenerateNode(node), 'regenerate'));
    }
    view.actions.append(actionButton('Delete', 'Delete this message and what follows it', () => deleteMessage(node), 'delete'));
  }
}

async function editMessage(node) {
  const view = views.get(node.id);
  if (!view || running.has(current.id)) return;
  const text = await editInPlace(view, node);
  if (text === null || text === node.content) { view.actions.querySelector('.edit')?.focus(); return; }
  const conv = current;
  const copy = addNode(conv, node.parent, { role: node.role, content: text, attachments: node.attachments || [] });
  save(conv);
  showConversation();
  if (node.role === 'user') generate(conv, copy.id);
}

function deleteMessage(node) {
  if (running.has(current.id)) return;
  deleteNode(current, node.id);
  save();
  showConversation();
  $('input').focus();
}

// Continue: the same answer grows (continue_final_message: the server renders it open and the
// model extends its text), no new branch.
function continueNode(node) {
  if (!app.canSend() || running.has(current.id)) return;
  generate(current, node.parent, node);
}

function regenerateNode(node) {
  if (!app.canSend() || running.has(current.id)) return;
  generate(current, node.parent);
}

// --- sending --------------------------------------------------------------------------------

function requestBody(conv, parentId) {
  const messages = [];
  if (conv.system && conv.system.trim()) messages.push({ role: 'system', content: conv.system });
  const saved = conv.leaf;
  conv.leaf = parentId;
  for (const m of pathOf(conv)) {
    if (m.error && !m.content) continue;
    messages.push({ role: m.role, content: m.role === 'user' ? contentWithAttachments(m.content, m.attachments) : m.content });
  }
  conv.leaf = saved;
  const body = { messages, stream: true, stream_options: { include_usage: true }, ...generationParams('chat') };
  const model = app.modelId();
  if (model) body.model = model;
  return body;
}

// Streams an answer to the message `parentId` of `conv`, as a new branch end, or, with
// `extend` (an answer of `conv`), more of that answer.
async function generate(conv, parentId, extend = null) {
  const body = requestBody(conv, extend ? extend.id : parentId);
  if (extend) body.continue_final_message = true;
  const m = extend || addNode(conv, parentId, { role: 'assistant', content: '', reasoning: '', reasoningChunks: 0 });
  if (extend) { delete m.stopped; delete m.error; m.reasoningChunks = 0; m.reasoning = m.reasoning || ''; }
  const run = { controller: new AbortController(), node: m, view: null };
  running.set(conv.id, run);
  if (conv === current) showConversation();
  const viewNow = () => (conv === current ? run.view : null);
  noteSent();
  setBusy(running.size > 0);
  announce('Writing an answer…');
  const started = performance.now();
  let firstAt = null;
  let usage = null;
  let finish = null;
  if (viewNow()) { viewNow().state.textContent = 'waiting…'; viewNow().root.dataset.state = 'waiting'; }
  // Until the first token: say whether the request is queued (and where), or reading the prompt.
  const waiting = setInterval(() => {
    const view = viewNow();
    if (firstAt || !view) return;
    const waited = (performance.now() - started) / 1000;
    const position = queuePosition(waited);
    const active = position ? null : thisPagesRequest();
    if (position) view.state.textContent = 'queued: position ' + position;
    else if (active && active.stage === 'prompt') view.state.textContent = prefillText(active);
    else view.state.textContent = 'waiting for the first token…';
    view.root.dataset.state = position ? 'queued' : 'waiting';
  }, 250);
  let frame = 0;
  const paint = () => {
    frame = 0;
    const view = viewNow();
    if (!view) return;
    fillMessage(view, m, { streaming: true, reasoningOpen: settings.display().reasoningOpen });
    markStreaming(view);
    followIfAtBottom();
  };
  try {
    await stream('/v1/chat/completions', body, (chunk) => {
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices && chunk.choices[0];
      if (!choice) return;
      if (choice.finish_reason) finish = choice.finish_reason;
      const d = choice.delta || {};
      if ((d.content || d.reasoning_content) && !firstAt) firstAt = performance.now();
      if (d.reasoning_content) { m.reasoning += d.reasoning_content; m.reasoningChunks++; }
      if (d.content) m.content += d.content;
      if (!frame) frame = requestAnimationFrame(paint);
    }, run.controller.signal);
  } catch (e) {
    if (e.name === 'AbortError') {
      m.stopped = true;
    } else {
      m.error = e.message;
      if (e instanceof ApiError && e.status === 401) app.onAuthError();
    }
  } finally {
    clearInterval(waiting);
    if (frame) cancelAnimationFrame(frame);
    m.stats = { seconds: (performance.now() - started) / 1000 };
    if (firstAt) m.stats.ttft_s = (firstAt - started) / 1000;
    if (usage) {
      m.stats.prompt_tokens = usage.prompt_tokens;
      m.stats.cached_tokens = (usage.prompt_tokens_details || {}).cached_tokens || 0;
      m.stats.completion_tokens = usage.completion_tokens;
      m.stats.reasoning_tokens = (usage.completion_tokens_details || {}).reasoning_tokens;
      if (usage.completion_tokens > 1 && firstAt)
        m.stats.seconds_per_token = (performance.now() - firstAt) / 1000 / (usage.completion_tokens - 1);
    }
    if (finish) m.stats.finish_reason = finish;
    delete m.reasoningChunks;
    touch(m);
    running.delete(conv.id);
    setBusy(running.size > 0);
    const view = viewNow();
    if (view) {
      view.root.removeAttribute('aria-busy');
      view.root.dataset.state = m.error ? 'error' : m.stopped ? 'stopped' : 'done';
      fillMessage(view, m);
      updateActions();
      setButtons();
      drawMeter();
      followIfAtBottom();
    }
    announce(m.error ? 'The answer failed: ' + m.error : (m.stopped ? 'Answer stopped: ' : 'Answer: ') + m.content.slice(0, 600));
    save(conv);
  }
}

// "reading the prompt: 1,200 of 5,000 tokens, …" while this page's request reads its prompt.
function prefillText(active) {
  const p = active.prefill;
  if (!p || !p.total_tokens) return 'reading the prompt (' + active.prompt_tokens + ' tokens)…';
  return 'reading the prompt: ' + prefillProgress(p) + '…';
}

// Sends the text in the box. Returns false, leaving the text where it is, when it cannot be sent.
async function send(text) {
  if (!app.canSend()) { composerNote('The server cannot take a message now (see the banner above); your text stays here.'); return false; }
  if (running.has(current.id)) {
    composerNote('An answer is still being written: wait for it or press Stop. Your text stays here.');
    return false;
  }
  const files = attachments();
  const problem = await checkFits(text, files);
  if (problem) { composerNote(problem); return false; }
  const conv = current;
  const node = addNode(conv, conv.leaf, { role: 'user', content: text, attachments: files });
  const exact = exactCount();
  if (exact && exact.text === contentWithAttachments(text, files)) node.tokens = exact;
  save(conv);
  generate(conv, node.id);
  return true;
}

// Alt+R: the last answer again, as a new version.
export function regenerate() {
  if (!current || !app.canSend() || running.has(current.id)) return;
  const path = pathOf(current);
  const last = path[path.length - 1];
  if (!last) return;
  generate(current, last.role === 'assistant' ? last.parent : last.id);
}

// Alt+E: edit the last message of yours.
export function editLast() {
  if (!current) return;
  const user = pathOf(current).filter((m) => m.role === 'user').pop();
  if (user) editMessage(user);
}

export function stopChat() {
  const run = current && running.get(current.id);
  if (run) run.controller.abort();
}

export function setButtons() {
  if (!app || !current) return;
  const busy = running.has(current.id);
  $('send').disabled = !app.canSend() || busy;
  $('stop').disabled = !busy;
  // Typing is always possible (while the model loads, or an answer streams); only sending waits.
  $('input').disabled = app.readOnly();
}

function download(name, text) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function exportAll() {
  download('k3serve-conversations-' + new Date().toISOString().slice(0, 10) + '.json', conversations.exportJson());
}

function onExternalChange(id) {
  if (current && current.id === id) {
    if (!conversations.get(id)) {
      const next = conversations.all()[0];
      if (next) { current = next; conversations.setCurrent(next.id); } else current = createConversation();
    } else if (document.querySelector('#messages .edit-box')) {
      renderList();
      return;  // an edit is open: the other tab's change shows after it
    }
    showConversation();
  } else {
    renderList();
  }
}

export async function initChat(appHooks) {
  app = appHooks;
  await openStore({
    onSaveError: (why) => {
      $('save-warning-text').textContent = 'Not saved: ' + why + '. Export the conversations to keep them.';
      $('save-warning').hidden = false;
    },
    onSaved: () => { $('save-warning').hidden = true; },
    onExternalChange,
  });
  current = conversations.get(conversations.currentId()) || conversations.all()[0];
  if (!current) { current = createConversation(); conversations.put(current); }
  conversations.setCurrent(current.id);
  initComposer({ tokensSoFar });
  $('composer').addEventListener('submit', async (e) => {
    e.preventDefault();
    const text = $('input').value.trim();
    if (!text && !attachments().length) return;
    // The box is cleared only once the message is taken, never before: a message typed while an
    // answer streams stays in the box.
    if (await send(text)) { $('input').value = ''; clearComposer(); }
  });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  });
  $('messages').addEventListener('scroll', () => { stick = atBottom($('messages')); }, { passive: true });
  $('stop').addEventListener('click', stopChat);
  $('new-conversation').addEventListener('click', () => newConversation());
  $('toast-undo').addEventListener('click', undoDelete);
  $('conversation-search').addEventListener('input', renderList);
  $('export-conversations').addEventListener('click', exportAll);
  $('save-warning-export').addEventListener('click', exportAll);
  $('import-conversations').addEventListener('click', () => $('import-file').click());
  $('import-file').addEventListener('change', async (e) => {
    const file = e.target.files[0];
    e.target.value = '';
    if (!file) return;
    try {
      const n = await conversations.importJson(await file.text());
      $('toast-text').textContent = 'Imported ' + n + ' conversation' + (n === 1 ? '' : 's') + '.';
      renderList();
      if (current) showConversation();
    } catch (err) {
      $('toast-text').textContent = 'Import failed: ' + err.message;
    }
    $('toast-undo').hidden = true;
    $('toast').hidden = false;
    clearTimeout(deleteConversation.timer);
    deleteConversation.timer = setTimeout(() => { $('toast').hidden = true; $('toast-undo').hidden = false; }, 8000);
  });
  $('system-prompt').addEventListener('change', () => {
    current.system = $('system-prompt').value;
    current.metaUpdated = Date.now();
    $('system-summary').textContent = current.system ? '(set)' : '';
    save();
  });
  showConversation();
}
