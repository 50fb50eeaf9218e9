// The completion view: a raw prompt (no chat template) and its continuation streamed from
// /v1/completions, the prompt shown muted and the continuation after it.
import { ApiError, stream } from './api.js';
import { noteSent, setBusy } from './figures.js';
import { formatSeconds } from './format.js';
import { generationParams } from './settings.js';

const $ = (id) => document.getElementById(id);
let app = null;
let controller = null;

async function run() {
  const prompt = $('completion-prompt').value;
  if (!prompt || controller || !app.canSend()) return;
  const out = $('completion-output');
  out.textContent = '';
  const shown = document.createElement('span');
  shown.className = 'prompt-text';
  shown.textContent = prompt;
  const continuation = document.createElement('span');
  continuation.className = 'continuation';
  out.append(shown, continuation);
  controller = new AbortController();
  noteSent();
  setBusy(true);
  setButtons();
  $('completion-state').textContent = 'waiting…';
  const started = performance.now();
  let firstAt = null;
  let usage = null;
  const body = { prompt, stream: true, stream_options: { include_usage: true }, ...generationParams('completion') };
  const model = app.modelId();
  if (model) body.model = model;
  try {
    await stream('/v1/completions', body, (chunk) => {
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices && chunk.choices[0];
      if (choice && choice.text) {
        if (!firstAt) { firstAt = performance.now(); $('completion-state').textContent = 'generating…'; }
        continuation.textContent += choice.text;
      }
    }, controller.signal);
    const parts = [];
    if (usage) parts.push(usage.completion_tokens + ' tokens', 'prompt ' + usage.prompt_tokens + ' (' +
      ((usage.prompt_tokens_details || {}).cached_tokens || 0) + ' cached)');
    if (firstAt) parts.push('first token after ' + formatSeconds((firstAt - started) / 1000));
    $('completion-state').textContent = parts.join(' · ');
  } catch (e) {
    if (e.name === 'AbortError') {
      $('completion-state').textContent = 'stopped';
    } else {
      $('completion-state').textContent = 'Error: ' + e.message;
      if (e instanceof ApiError && e.status === 401) app.onAuthError();
    }
  } finally {
    controller = null;
    setBusy(false);
    setButtons();
  }
}

export function stopCompletion() {
  if (controller) controller.abort();
}

export function setCompletionButtons() { setButtons(); }

function setButtons() {
  $('completion-run').disabled = !app.canSend() || controller !== null;
  $('completion-stop').disabled = controller === null;
}

export function initCompletion(appHooks) {
  app = appHooks;
  $('completion-run').addEventListener('click', run);
  $('completion-stop').addEventListener('click', stopCompletion);
  $('completion-prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); }
  });
  setButtons();
}
