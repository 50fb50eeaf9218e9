// The chat view: conversations kept in the browser (list, rename, delete with undo, new), a
// system prompt per conversation, streamed answers with reasoning collapsed, Markdown output,
// stop (aborting the fetch makes the daemon cancel the job), regenerate and edit of the last turn.
import { ApiError, stream } from './api.js';
import { latestStatus, queuePosition, setBusy } from './figures.js';
import { copyText, renderMarkdown } from './markdown.js';
import { generationParams } from './settings.js';
import { conversations } from './store.js';
import { formatSeconds } from './format.js';

const $ = (id) => document.getElementById(id);

let app = null;              // {canSend(), onAuthError(), modelId()}
let current = null;          // the open conversation
let controller = null;       // AbortController of the request in flight
let editStash = null;        // messages removed by "edit", put back by "cancel"
let undo = null;             // the last deleted conversation

export function chatBusy() { return controller !== null; }

// --- conversation list ----------------------------------------------------------------------

function titleOf(text) {
  const line = text.trim().split('\n')[0];
  return line.length > 48 ? line.slice(0, 47) + '…' : line || 'New conversation';
}

function renderList() {
  const list = $('conversation-list');
  list.textContent = '';
  for (const c of conversations.all()) {
    const li = document.createElement('li');
    const open = document.createElement('button');
    open.type = 'button';
    open.className = 'open';
    open.textContent = c.title;
    open.title = c.title;
    if (current && c.id === current.id) open.setAttribute('aria-current', 'true');
    open.addEventListener('click', () => openConversation(c.id));
    const rename = smallButton('✎', 'Rename “' + c.title + '”', () => startRename(li, c));
    rename.classList.add('rename');
    const remove = smallButton('✕', 'Delete “' + c.title + '”', () => deleteConversation(c.id));
    remove.classList.add('delete');
    li.append(open, rename, remove);
    list.append(li);
  }
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
      conversations.put(fresh);
      if (current && current.id === c.id) current = fresh;
    }
    renderList();
  };
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') finish(true);
    if (e.key === 'Escape') { e.stopPropagation(); finish(false); }
  });
  input.addEventListener('blur', () => finish(true));
}

function deleteConversation(id) {
  if (current && current.id === id && controller) controller.abort();
  undo = conversations.remove(id);
  if (current && current.id === id) {
    const next = conversations.all()[0];
    if (next) openConversation(next.id); else newConversation();
  }
  renderList();
  $('toast-text').textContent = 'Deleted “' + undo.removed.title + '”.';
  $('toast').hidden = false;
  clearTimeout(deleteConversation.timer);
  deleteConversation.timer = setTimeout(() => { $('toast').hidden = true; undo = null; }, 8000);
}

function undoDelete() {
  if (!undo) return;
  conversations.restore(undo);
  const id = undo.removed.id;
  undo = null;
  $('toast').hidden = true;
  openConversation(id);
}

export function newConversation() {
  if (controller) controller.abort();
  // An empty conversation is reused rather than piling up.
  const empty = conversations.all().find((c) => c.messages.length === 0 && !c.system);
  current = empty || conversations.create();
  conversations.setCurrent(current.id);
  showConversation();
  $('input').focus();
}

function openConversation(id) {
  if (current && current.id === id) return;
  if (controller) controller.abort();
  current = conversations.get(id);
  conversations.setCurrent(id);
  cancelEdit();
  showConversation();
  document.body.classList.remove('show-conversations');
}

function save() {
  if (!current) return;
  if (!current.renamed) {
    const first = current.messages.find((m) => m.role === 'user');
    if (first) current.title = titleOf(first.content);
  }
  conversations.put(current);
  renderList();
}

// --- messages -------------------------------------------------------------------------------

function showConversation() {
  $('system-prompt').value = current.system || '';
  $('system-summary').textContent = current.system ? '(set)' : '';
  const box = $('messages');
  box.textContent = '';
  current.messages.forEach((m) => box.append(messageElement(m).root));
  updateActions();
  renderList();
}

// Builds the DOM of one message; returns handles the streaming code updates.
function messageElement(m) {
  const root = document.createElement('article');
  root.className = 'msg ' + m.role;
  root.setAttribute('aria-label', m.role === 'user' ? 'You' : 'Assistant');
  const meta = document.createElement('div');
  meta.className = 'meta';
  const who = document.createElement('span');
  who.className = 'who';
  who.textContent = m.role === 'user' ? 'You' : 'Assistant';
  const state = document.createElement('span');
  state.className = 'state';
  meta.append(who, state);
  const reasoning = document.createElement('details');
  reasoning.className = 'reasoning';
  const summary = document.createElement('summary');
  const reasoningText = document.createElement('div');
  reasoningText.className = 'reasoning-text';
  reasoning.append(summary, reasoningText);
  const content = document.createElement('div');
  content.className = 'content' + (m.role === 'assistant' ? ' markdown' : '');
  const stats = document.createElement('div');
  stats.className = 'stats';
  const actions = document.createElement('div');
  actions.className = 'actions';
  root.append(meta, reasoning, content, stats, actions);
  const view = { root, state, reasoning, summary, reasoningText, content, stats, actions };
  fillMessage(view, m);
  return view;
}

function fillMessage(view, m) {
  if (m.role === 'user') {
    view.content.textContent = m.content;
  } else {
    renderMarkdown(view.content, m.content);
  }
  view.reasoning.hidden = !m.reasoning;
  if (m.reasoning) {
    const n = m.stats && m.stats.reasoning_tokens !== undefined ? m.stats.reasoning_tokens : m.reasoningChunks || 0;
    view.summary.textContent = 'Reasoning (' + n + ' tokens)';
    view.reasoningText.textContent = m.reasoning;
  }
  view.stats.textContent = statsLine(m);
  view.root.classList.toggle('error', Boolean(m.error));
  if (m.error) {
    const p = document.createElement('p');
    p.className = 'error-text';
    p.setAttribute('role', 'alert');
    p.textContent = 'Error: ' + m.error;
    view.content.append(p);
  }
  view.state.textContent = m.stopped ? 'stopped' : '';
}

function statsLine(m) {
  const s = m.stats;
  if (!s) return '';
  const parts = [];
  if (s.completion_tokens !== undefined) parts.push(s.completion_tokens + ' tokens');
  if (s.seconds_per_token) parts.push(formatSeconds(s.seconds_per_token) + '/token');
  if (s.ttft_s !== undefined) parts.push('first token after ' + formatSeconds(s.ttft_s));
  if (s.prompt_tokens !== undefined) parts.push('prompt ' + s.prompt_tokens + ' tokens, ' + s.cached_tokens + ' cached');
  return parts.join(' · ');
}

// Copy on every answer; Edit on the last user message, Regenerate on the last answer.
function updateActions() {
  const views = [...$('messages').children];
  const msgs = current.messages;
  views.forEach((root, i) => {
    const actions = root.querySelector('.actions');
    actions.textContent = '';
    const m = msgs[i];
    if (!m) return;
    const last = i === msgs.length - 1;
    if (m.role === 'assistant' && m.content) {
      actions.append(actionButton('Copy', 'Copy the answer', async (b) => {
        b.textContent = (await copyText(m.content)) ? 'Copied' : 'Copy failed';
        setTimeout(() => { b.textContent = 'Copy'; }, 1500);
      }));
    }
    if (last && m.role === 'assistant' && !controller) {
      actions.append(actionButton('Regenerate', 'Regenerate the last answer (Alt+R)', () => regenerate(), 'regenerate'));
    }
    const lastUser = msgs.map((x) => x.role).lastIndexOf('user');
    if (i === lastUser && !controller) {
      actions.append(actionButton('Edit', 'Edit the last message (Alt+E)', () => editLast(), 'edit'));
    }
  });
}

function actionButton(text, label, onClick, cls) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'action' + (cls ? ' ' + cls : '');
  b.textContent = text;
  b.title = label;
  b.addEventListener('click', () => onClick(b));
  return b;
}

// --- sending --------------------------------------------------------------------------------

function requestBody() {
  const messages = [];
  if (current.system && current.system.trim()) messages.push({ role: 'system', content: current.system });
  for (const m of current.messages) if (!m.error || m.content) messages.push({ role: m.role, content: m.content });
  const body = { messages, stream: true, stream_options: { include_usage: true }, ...generationParams('chat') };
  const model = app.modelId();
  if (model) body.model = model;
  return body;
}

async function generate() {
  const body = requestBody();
  const m = { role: 'assistant', content: '', reasoning: '', reasoningChunks: 0 };
  current.messages.push(m);
  const view = messageElement(m);
  $('messages').append(view.root);
  view.root.scrollIntoView({ block: 'end' });
  const conv = current;
  controller = new AbortController();
  setBusy(true);
  setButtons();
  updateActions();
  const started = performance.now();
  let firstAt = null;
  let usage = null;
  let finish = null;
  view.state.textContent = 'waiting…';
  // Until the first token: say whether the request is queued (and where), or reading the prompt.
  const waiting = setInterval(() => {
    if (firstAt) return;
    const waited = (performance.now() - started) / 1000;
    const position = queuePosition(waited);
    const status = latestStatus();
    const active = status && status.active && status.active[0];
    if (position) view.state.textContent = 'queued: position ' + position;
    else if (active && active.stage === 'prompt') view.state.textContent = 'reading the prompt (' + active.prompt_tokens + ' tokens)…';
    else view.state.textContent = 'waiting for the first token…';
    view.root.dataset.state = position ? 'queued' : 'waiting';
  }, 250);
  let frame = 0;
  const paint = () => {
    frame = 0;
    fillMessage(view, m);
    view.state.textContent = 'generating…';
    view.root.scrollIntoView({ block: 'end' });
  };
  try {
    await stream('/v1/chat/completions', body, (chunk) => {
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices && chunk.choices[0];
      if (!choice) return;
      if (choice.finish_reason) finish = choice.finish_reason;
      const d = choice.delta || {};
      if (d.content || d.reasoning_content) {
        if (!firstAt) { firstAt = performance.now(); view.root.dataset.state = 'streaming'; }
      }
      if (d.reasoning_content) { m.reasoning += d.reasoning_content; m.reasoningChunks++; }
      if (d.content) m.content += d.content;
      if (!frame) frame = requestAnimationFrame(paint);
    }, controller.signal);
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
    const seconds = (performance.now() - started) / 1000;
    m.stats = { seconds };
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
    controller = null;
    setBusy(false);
    view.root.dataset.state = m.error ? 'error' : m.stopped ? 'stopped' : 'done';
    if (conv === current) {
      fillMessage(view, m);
      setButtons();
      updateActions();
    }
    conversations.put(conv);
    renderList();
  }
}

function send(text) {
  if (!app.canSend() || controller) return;
  editStash = null;
  $('editing-note').hidden = true;
  current.messages.push({ role: 'user', content: text });
  $('messages').append(messageElement(current.messages[current.messages.length - 1]).root);
  save();
  generate();
}

export function regenerate() {
  if (!app.canSend() || controller || !current.messages.length) return;
  const last = current.messages[current.messages.length - 1];
  if (last.role === 'assistant') {
    current.messages.pop();
    $('messages').lastElementChild.remove();
  }
  if (!current.messages.length) return;
  generate();
}

export function editLast() {
  if (controller) return;
  const i = current.messages.map((m) => m.role).lastIndexOf('user');
  if (i < 0) return;
  editStash = current.messages.splice(i);
  $('input').value = editStash[0].content;
  $('editing-note').hidden = false;
  showConversation();
  $('input').focus();
}

function cancelEdit() {
  if (!editStash) return;
  current.messages.push(...editStash);
  editStash = null;
  $('editing-note').hidden = true;
  $('input').value = '';
  showConversation();
}

export function stopChat() {
  if (controller) controller.abort();
}

export function setButtons() {
  const can = app.canSend();
  $('send').disabled = !can || controller !== null;
  $('stop').disabled = controller === null;
  $('input').disabled = !can;
}

export function initChat(appHooks) {
  app = appHooks;
  current = conversations.get(conversations.currentId()) || conversations.all()[0] || conversations.create();
  conversations.setCurrent(current.id);
  showConversation();
  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = $('input').value.trim();
    if (!text) return;
    $('input').value = '';
    send(text);
  });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  });
  $('stop').addEventListener('click', stopChat);
  $('new-conversation').addEventListener('click', newConversation);
  $('toast-undo').addEventListener('click', undoDelete);
  $('cancel-edit').addEventListener('click', cancelEdit);
  $('system-prompt').addEventListener('change', () => {
    current.system = $('system-prompt').value;
    $('system-summary').textContent = current.system ? '(set)' : '';
    save();
  });
  setButtons();
}
