// One message on screen: who, its branch switcher (‹2/3› when an edit or a regeneration left
// alternatives), reasoning (folded unless the display switch shows it while streaming), the
// attachments, the text (Markdown for answers), the figures line and the actions (Copy, Edit,
// Regenerate, Delete). The chat view owns the conversation; this file only draws a node.
import { formatRate, formatSeconds } from './format.js';
import { renderMarkdown, renderStreaming } from './markdown.js';

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

// Builds the DOM of one message; returns the handles the streaming code updates.
export function messageElement(node) {
  const root = el('article', 'msg ' + node.role);
  root.dataset.id = node.id;
  root.setAttribute('aria-label', node.role === 'user' ? 'You' : 'Assistant');
  const meta = el('div', 'meta');
  const who = el('span', 'who', node.role === 'user' ? 'You' : 'Assistant');
  const branch = el('span', 'branch');
  const state = el('span', 'state');
  meta.append(who, branch, state);
  const reasoning = el('details', 'reasoning');
  const summary = el('summary');
  const reasoningText = el('div', 'reasoning-text');
  reasoning.append(summary, reasoningText);
  const files = el('ul', 'attachments');
  const content = el('div', 'content' + (node.role === 'assistant' ? ' markdown' : ''));
  const failure = el('p', 'error-text');
  failure.setAttribute('role', 'alert');
  const stats = el('div', 'stats');
  const actions = el('div', 'actions');
  root.append(meta, reasoning, files, content, failure, stats, actions);
  return { root, branch, state, reasoning, summary, reasoningText, files, content, failure, stats, actions };
}

// Fills a message view from its node; `streaming` renders the answer block by block.
export function fillMessage(view, node, { streaming = false, reasoningOpen = false } = {}) {
  if (node.role === 'user') {
    if (view.content.textContent !== node.content) view.content.textContent = node.content;
  } else if (streaming) {
    renderStreaming(view.content, node.content, false);
  } else {
    renderMarkdown(view.content, node.content);
  }
  const files = node.attachments || [];
  view.files.hidden = files.length === 0;
  if (view.files.childElementCount !== files.length) {
    view.files.textContent = '';
    for (const f of files) view.files.append(el('li', 'chip', '📄 ' + f.name + ' (' + f.text.length + ' characters)'));
  }
  view.reasoning.hidden = !node.reasoning;
  if (node.reasoning) {
    const n = node.stats && node.stats.reasoning_tokens !== undefined ? node.stats.reasoning_tokens : node.reasoningChunks || 0;
    view.summary.textContent = 'Reasoning (' + n + ' tokens)';
    if (view.reasoningText.textContent !== node.reasoning) view.reasoningText.textContent = node.reasoning;
    if (streaming && reasoningOpen && !view.reasoningShown) { view.reasoning.open = true; view.reasoningShown = true; }
  }
  view.stats.textContent = statsLine(node);
  // The error class is `failed`, not `error`: `.error` colours all text red (it is the class of
  // the form's error lines), and the answer's own text must stay readable.
  view.root.classList.toggle('failed', Boolean(node.error));
  view.failure.hidden = !node.error;
  view.failure.textContent = node.error ? 'Error: ' + node.error : '';
  if (!streaming) view.state.textContent = node.stopped ? 'stopped' : node.stats && node.stats.finish_reason === 'length' ? 'cut at the token limit' : '';
}

export function statsLine(m) {
  const s = m.stats;
  if (!s) return '';
  const parts = [];
  if (s.completion_tokens !== undefined) parts.push(s.completion_tokens + ' tokens');
  if (s.seconds_per_token) parts.push(formatSeconds(s.seconds_per_token) + '/token (' + formatRate(1 / s.seconds_per_token) + ' tokens/s)');
  if (s.ttft_s !== undefined) parts.push('first token after ' + formatSeconds(s.ttft_s));
  if (s.prompt_tokens !== undefined) parts.push('prompt ' + s.prompt_tokens + ' tokens, ' + s.cached_tokens + ' cached');
  return parts.join(' · ');
}

// The ‹ n/m › switcher between a message and its alternatives.
export function fillBranch(view, index, count, onPick) {
  view.branch.textContent = '';
  if (count < 2) return;
  const prev = el('button', 'icon small prev', '‹');
  prev.type = 'button';
  prev.setAttribute('aria-label', 'Previous version');
  prev.disabled = index === 0;
  prev.addEventListener('click', () => onPick(index - 1));
  const next = el('button', 'icon small next', '›');
  next.type = 'button';
  next.setAttribute('aria-label', 'Next version');
  next.disabled = index === count - 1;
  next.addEventListener('click', () => onPick(index + 1));
  const where = el('span', 'where', (index + 1) + '/' + count);
  where.setAttribute('aria-label', 'version ' + (index + 1) + ' of ' + count);
  view.branch.append(prev, where, next);
}

export function actionButton(text, label, onClick, cls) {
  const b = el('button', 'action' + (cls ? ' ' + cls : ''), text);
  b.type = 'button';
  b.title = label;
  if (label !== text) b.setAttribute('aria-label', label);
  b.addEventListener('click', () => onClick(b));
  return b;
}

// Replaces the message's text with an edit box; resolves with the new text, or null (Cancel, Esc).
export function editInPlace(view, node) {
  return new Promise((resolve) => {
    const box = el('div', 'edit-box');
    const label = el('label', 'sr', 'Edit the message');
    const area = el('textarea', 'edit-input');
    area.id = 'edit-' + node.id;
    label.htmlFor = area.id;
    area.value = node.content;
    area.rows = Math.min(12, Math.max(2, node.content.split('\n').length));
    const save = el('button', 'primary save-edit', node.role === 'user' ? 'Save and send' : 'Save');
    save.type = 'button';
    const cancel = el('button', 'cancel-edit', 'Cancel');
    cancel.type = 'button';
    const row = el('div', 'row');
    row.append(save, cancel);
    box.append(label, area, row);
    view.content.hidden = true;
    view.actions.hidden = true;
    view.content.after(box);
    area.focus();
    const done = (value) => {
      box.remove();
      view.content.hidden = false;
      view.actions.hidden = false;
      resolve(value);
    };
    save.addEventListener('click', () => done(area.value.trim() ? area.value : null));
    cancel.addEventListener('click', () => done(null));
    area.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') { e.stopPropagation(); e.preventDefault(); done(null); }
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); save.click(); }
    });
  });
}
