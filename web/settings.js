// The settings dialog: generation parameters (kept in the browser), their limits from the
// server's /props, and the API key. generationParams() turns them into request fields.
import { DEFAULT_PARAMS, settings } from './store.js';

const $ = (id) => document.getElementById(id);
let limits = { n_ctx: null, max_prompt_tokens: null };

const FIELDS = [
  ['p-max-tokens', 'max_tokens', 'int-or-null'],
  ['p-temperature', 'temperature', 'number'],
  ['p-top-p', 'top_p', 'number'],
  ['p-top-k', 'top_k', 'int'],
  ['p-min-p', 'min_p', 'number'],
  ['p-seed', 'seed', 'int-or-null'],
];

// Fields for a chat (`kind` "chat") or completion request. Defaults are not sent.
export function generationParams(kind) {
  const p = settings.params();
  const out = {};
  // Unset: a chat answer may use the rest of the context (the server's default); a completion,
  // whose server default is 16 tokens, gets 128.
  let max = p.max_tokens === null ? (kind === 'chat' ? null : 128) : p.max_tokens;
  if (max !== null && limits.n_ctx && max > limits.n_ctx) max = limits.n_ctx;
  if (max !== null) out[kind === 'chat' ? 'max_completion_tokens' : 'max_tokens'] = max;
  out.temperature = p.temperature;
  if (p.top_p !== 1) out.top_p = p.top_p;
  if (p.top_k > 0) out.top_k = p.top_k;
  if (p.min_p > 0) out.min_p = p.min_p;
  if (p.seed !== null && p.seed !== undefined) out.seed = p.seed;
  if (p.stop && p.stop.length) out.stop = p.stop;
  if (kind === 'chat') out.reasoning_effort = p.thinking;
  return out;
}

function fill(p) {
  for (const [id, key] of FIELDS) $(id).value = p[key] === null ? '' : String(p[key]);
  $('p-stop').value = (p.stop || []).join('\n');
  $('p-thinking').value = p.thinking;
  $('api-key').value = settings.apiKey();
}

// Reads the form; returns the parameters or throws Error naming the bad field.
function read() {
  const p = {};
  for (const [id, key, type] of FIELDS) {
    const input = $(id);
    const raw = input.value.trim();
    if (type === 'int-or-null' && raw === '') { p[key] = null; continue; }
    const v = Number(raw);
    if (raw === '' || !Number.isFinite(v) || (type !== 'number' && !Number.isInteger(v)) ||
        (input.min !== '' && v < Number(input.min)) || (input.max !== '' && v > Number(input.max))) {
      input.focus();
      const range = (input.min !== '' ? ' from ' + input.min : '') + (input.max !== '' ? ' to ' + input.max : '');
      throw new Error($('settings-form').querySelector('label[for="' + id + '"]').textContent + ': enter a ' +
        (type === 'number' ? 'number' : 'whole number') + range);
    }
    p[key] = v;
  }
  const stops = $('p-stop').value.split('\n').filter((s) => s.length > 0);
  if (stops.length > 4) throw new Error('Stop strings: at most 4');
  p.stop = stops;
  p.thinking = $('p-thinking').value;
  return p;
}

// Limits from /props: max tokens can never exceed the context.
export function applyLimits(props) {
  limits = { n_ctx: props.n_ctx, max_prompt_tokens: props.max_prompt_tokens };
  $('p-max-tokens').max = String(props.n_ctx);
  $('limits-note').textContent = 'Context ' + props.n_ctx + ' tokens (prompt at most ' + props.max_prompt_tokens +
    '), queue ' + props.queue_capacity + ' requests. Parameters are kept in this browser.';
}

export function initSettings(onSaved) {
  const dialog = $('settings');
  $('open-settings').addEventListener('click', () => openSettings());
  $('settings-reset').addEventListener('click', () => fill({ ...DEFAULT_PARAMS }));
  $('settings-form').addEventListener('submit', (e) => {
    if (e.submitter && e.submitter.value !== 'save') return;
    try {
      settings.setParams(read());
      settings.setApiKey($('api-key').value.trim());
      $('settings-error').textContent = '';
      onSaved();
    } catch (err) {
      e.preventDefault();
      $('settings-error').textContent = err.message;
    }
  });
  dialog.addEventListener('close', () => $('open-settings').focus());
}

export function openSettings() {
  fill(settings.params());
  $('settings-error').textContent = '';
  $('settings').showModal();
}
