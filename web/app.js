// k3serve web UI: starts the views, follows the daemon's state (loading with progress, ready,
// failed, shutting down, unreachable and reconnecting, read-only when the API key is refused),
// switches tabs and handles the keyboard shortcuts. No build step: ES modules served as they are.
import { ApiError, request } from './api.js';
import { chatBusy, editLast, initChat, newConversation, regenerate, setButtons, stopChat } from './chat.js';
import { initCompletion, setCompletionButtons, stopCompletion } from './completion.js';
import { retryNow, startFigures } from './figures.js';
import { applyLimits, initSettings, openSettings } from './settings.js';
import { initTokenizer } from './tokenizer.js';

const $ = (id) => document.getElementById(id);

const state = {
  phase: 'connecting',   // connecting | loading | ready | failed | draining | disconnected
  readOnly: false,       // the API key was refused
  modelId: null,
  checked: false,        // /v1/models and /props were read since the daemon became ready
};

const hooks = {
  canSend: () => state.phase === 'ready' && !state.readOnly,
  readOnly: () => state.readOnly,
  modelId: () => state.modelId,
  onAuthError: () => { state.readOnly = true; refresh(); },
};

function banner(text, kind, { progress, action, onAction } = {}) {
  const b = $('banner');
  b.hidden = !text;
  b.className = 'banner ' + (kind || '');
  b.dataset.kind = kind || '';
  b.setAttribute('role', kind === 'error' || kind === 'readonly' ? 'alert' : 'status');
  $('banner-text').textContent = text || '';
  const bar = $('banner-progress');
  bar.hidden = progress === undefined;
  if (progress === null) bar.removeAttribute('value');
  else if (progress !== undefined) bar.value = progress;
  const button = $('banner-action');
  button.hidden = !action;
  button.textContent = action || '';
  button.onclick = onAction || null;
}

function pill(text, kind) {
  const p = $('connection');
  p.textContent = text;
  p.className = 'pill ' + kind;
  p.dataset.state = kind;
}

// Repaints the header pill, the banner and the buttons from `state`.
function refresh() {
  switch (state.phase) {
    case 'loading':
      pill('loading', 'loading');
      banner('Loading the model: ' + state.status, 'info', { progress: state.progress });
      break;
    case 'failed':
      pill('failed', 'error');
      banner('The model failed to load: ' + state.status, 'error');
      break;
    case 'draining':
      pill('shutting down', 'error');
      banner('The server is shutting down; new requests are refused.', 'error');
      break;
    case 'disconnected':
      pill('disconnected', 'error');
      banner('Disconnected from the server: reconnecting in ' + state.retryIn + ' s.', 'error',
        { action: 'Retry now', onAction: () => { retryNow(); } });
      break;
    case 'ready':
      if (!state.chatReady) {
        pill('opening conversations…', 'loading');
        banner('');
      } else if (state.readOnly) {
        pill('read-only', 'warn');
        banner('Read-only: the server refused the API key. Conversations can be read; enter a valid key in Settings to send.',
          'readonly', { action: 'Settings', onAction: openSettings });
      } else {
        pill('ready', 'ready');
        banner('');
      }
      break;
    default:
      pill('connecting…', 'loading');
  }
  $('model-name').textContent = state.modelId ? '· ' + state.modelId : '';
  setButtons();
  setCompletionButtons();
}

// Once the daemon is ready: the model id (which also checks the API key) and the limits.
async function checkServer() {
  state.checked = true;
  try {
    const models = await request('/v1/models');
    state.modelId = models.data[0].id;
    state.readOnly = false;
    applyLimits(await request('/props'));
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) state.readOnly = true;
    else state.checked = false;  // try again with the next status
  }
  refresh();
}

let countdown = null;

function onStatus(status, code) {
  clearInterval(countdown);
  if (code === 401) {  // /v1/status is behind the key (--metrics-auth): the key is wrong
    state.phase = 'ready';
    state.readOnly = true;
    refresh();
    return;
  }
  const was = state.phase;
  state.phase = status.phase;
  state.status = status.status;
  state.progress = status.progress;
  if (status.phase === 'ready' && (was !== 'ready' || !state.checked)) {
    checkServer();
    return;
  }
  if (status.phase !== 'ready') state.checked = false;
  if (was !== state.phase || status.phase === 'loading') refresh();
}

function onUnreachable(nextMs) {
  state.phase = 'disconnected';
  state.checked = false;
  state.retryIn = Math.round(nextMs / 1000);
  refresh();
  clearInterval(countdown);
  countdown = setInterval(() => {
    if (state.retryIn > 1) state.retryIn--;
    refresh();
  }, 1000);
}

// --- tabs, drawers and shortcuts ------------------------------------------------------------

const TABS = ['chat', 'completion', 'tokenizer'];

function showTab(name) {
  for (const t of TABS) {
    const tab = $('tab-' + t);
    const selected = t === name;
    tab.setAttribute('aria-selected', String(selected));
    tab.tabIndex = selected ? 0 : -1;
    $('view-' + t).hidden = !selected;
  }
  document.body.dataset.view = name;
}

function initTabs() {
  TABS.forEach((t, i) => {
    const tab = $('tab-' + t);
    tab.addEventListener('click', () => showTab(t));
    tab.addEventListener('keydown', (e) => {  // arrow keys move between tabs (ARIA tabs pattern)
      const d = e.key === 'ArrowRight' ? 1 : e.key === 'ArrowLeft' ? -1 : 0;
      if (!d) return;
      const next = TABS[(i + d + TABS.length) % TABS.length];
      showTab(next);
      $('tab-' + next).focus();
    });
  });
  showTab('chat');
}

const DRAWERS = [['toggle-conversations', 'show-conversations', 'conversations'], ['toggle-figures', 'show-figures', 'figures']];

function initDrawers() {
  for (const [button, cls, panel] of DRAWERS) {
    $(button).addEventListener('click', () => {
      const open = document.body.classList.toggle(cls);
      $(button).setAttribute('aria-expanded', String(open));
      if (open) { closeDrawers(button); $(panel).querySelector('button, input')?.focus(); }
    });
  }
}

// Closes the open drawers (but `except`); returns whether one was open. Focus goes back to the
// button that opened it when it was inside.
function closeDrawers(except) {
  let closed = false;
  for (const [button, cls, panel] of DRAWERS) {
    if (button === except || !document.body.classList.contains(cls)) continue;
    const hadFocus = $(panel).contains(document.activeElement);
    document.body.classList.remove(cls);
    $(button).setAttribute('aria-expanded', 'false');
    if (hadFocus || !except) $(button).focus();
    closed = true;
  }
  return closed;
}

function inTextBox(e) {
  const t = e.target;
  return t && (t.tagName === 'TEXTAREA' || t.tagName === 'INPUT' || t.tagName === 'SELECT' || t.isContentEditable);
}

function initShortcuts() {
  $('open-shortcuts').addEventListener('click', () => $('shortcuts').showModal());
  document.addEventListener('keydown', (e) => {
    if (document.querySelector('dialog[open]')) return;
    if (e.key === 'Escape' && closeDrawers()) { e.preventDefault(); return; }
    if (e.key === 'Escape' && chatBusy()) { stopChat(); e.preventDefault(); return; }
    if (e.key === 'Escape') { stopCompletion(); return; }
    if (e.altKey && !e.ctrlKey && !e.metaKey) {
      // By key position (e.code): Alt+letter types other characters on some layouts.
      const action = { KeyN: newConversation, KeyR: regenerate, KeyE: editLast, KeyS: openSettings,
        Digit1: () => showTab('chat'), Digit2: () => showTab('completion'), Digit3: () => showTab('tokenizer') }[e.code];
      if (action) { e.preventDefault(); action(); }
      return;
    }
    if (e.key === '?' && !inTextBox(e)) { e.preventDefault(); $('shortcuts').showModal(); }
  });
}

initTabs();
initDrawers();
initShortcuts();
initSettings(() => { state.checked = false; state.readOnly = false; checkServer(); });
initCompletion(hooks);
initTokenizer();
refresh();
startFigures({ onStatus, onUnreachable });
// The pill says "ready" only once the conversations are read too, so "ready" means usable.
initChat(hooks).then(() => { state.chatReady = true; refresh(); });
