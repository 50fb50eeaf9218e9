// The settings dialog: generation parameters (kept in the browser; empty means the server's
// default, shown from /props), the other sampling fields the server accepts (penalties,
// logit_bias, response_format), the display switches and the API key. generationParams() turns
// the parameters into request fields.
import { DEFAULT_DISPLAY, DEFAULT_PARAMS, settings } from './store.js';

const $ = (id) => document.getElementById(id);
let serverLimits = { n_ctx: null, max_prompt_tokens: null };
let serverDefaults = {};

export function limits() { return serverLimits; }

// [element id, parameter, kind]: kinds *-or-null are left to the server when empty.
const FIELDS = [
  ['p-max-tokens', 'max_tokens', 'int-or-null'],
  ['p-temperature', 'temperature', 'number-or-null'],
  ['p-top-p', 'top_p', 'number-or-null'],
  ['p-top-k', 'top_k', 'int'],
  ['p-min-p', 'min_p', 'number'],
  ['p-seed', 'seed', 'int-or-null'],
  ['p-presence', 'presence_penalty', 'number'],
  ['p-frequency', 'frequency_penalty', 'number'],
];

// Fields for a chat (`kind` "chat") or completion request. Unset fields are not sent.
export function generationParams(kind) {
  const p = settings.params();
  const out = {};
  // Unset: a chat answer may use the rest of the context (the server's default); a completion,
  // whose server default is 16 tokens, gets 128.
  let max = p.max_tokens === null ? (kind === 'chat' ? null : 128) : p.max_tokens;
  if (max !== null && serverLimits.n_ctx && max > serverLimits.n_ctx) max = serverLimits.n_ctx;
  if (max !== null) out[kind === 'chat' ? 'max_completion_tokens' : 'max_tokens'] = max;
  if (p.temperature !== null && p.temperature !== undefined) out.temperature = p.temperature;
  if (p.top_p !== null && p.top_p !== undefined && p.top_p !== 1) out.top_p = p.top_p;
  if (p.top_k > 0) out.top_k = p.top_k;
  if (p.min_p > 0) out.min_p = p.min_p;
  if (p.presence_penalty) out.presence_penalty = p.presence_penalty;
  if (p.frequency_penalty) out.frequency_penalty = p.frequency_penalty;
  if (p.logit_bias && Object.keys(p.logit_bias).length) out.logit_bias = p.logit_bias;
  if (p.seed !== null && p.seed !== undefined) out.seed = p.seed;
  if (p.stop && p.stop.length) out.stop = p.stop;
  if (p.response_format === 'json_object') out.response_format = { type: 'json_object' };
  if (p.response_format === 'json_schema' && p.json_schema) {
    out.response_format = { type: 'json_schema', json_schema: { name: 'answer', schema: JSON.parse(p.json_schema) } };
  }
  if (kind === 'chat') out.reasoning_effort = p.thinking;
  return out;
}

function fill(p, d) {
  for (const [id, key] of FIELDS) $(id).value = p[key] === null || p[key] === undefined ? '' : String(p[key]);
  $('p-stop').value = (p.stop || []).join('\n');
  $('p-thinking').value = p.thinking;
  $('p-logit-bias').value = p.logit_bias ? JSON.stringify(p.logit_bias) : '';
  $('p-format').value = p.response_format || 'text';
  $('p-schema').value = p.json_schema || '';
  $('schema-row').hidden = $('p-format').value !== 'json_schema';
  $('api-key').value = settings.apiKey();
  $('d-autoscroll').checked = d.autoScroll;
  $('d-reasoning').checked = d.reasoningOpen;
  $('d-theme').value = d.theme;
}

function fieldError(id, text) {
  $(id).focus();
  return new Error($('settings-form').querySelector('label[for="' + id + '"]').textContent + ': ' + text);
}

// Reads the form; returns the parameters or throws Error naming the bad field.
function read() {
  const p = {};
  for (const [id, key, type] of FIELDS) {
    const input = $(id);
    const raw = input.value.trim();
    if (type.endsWith('-or-null') && raw === '') { p[key] = null; continue; }
    const v = Number(raw);
    const whole = type.startsWith('int');
    if (raw === '' || !Number.isFinite(v) || (whole && !Number.isInteger(v)) ||
        (input.min !== '' && v < Number(input.min)) || (input.max !== '' && v > Number(input.max))) {
      const range = (input.min !== '' ? ' from ' + input.min : '') + (input.max !== '' ? ' to ' + input.max : '');
      throw fieldError(id, 'enter a ' + (whole ? 'whole number' : 'number') + range);
    }
    p[key] = v;
  }
  const stops = $('p-stop').value.split('\n').filter((s) => s.length > 0);
  if (stops.length > 4) throw fieldError('p-stop', 'at most 4');
  p.stop = stops;
  p.thinking = $('p-thinking').value;
  const bias = $('p-logit-bias').value.trim();
  p.logit_bias = null;
  if (bias) {
    let parsed;
    try { parsed = JSON.parse(bias); } catch { throw fieldError('p-logit-bias', 'not JSON (write {"token id": bias})'); }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed) ||
        Object.entries(parsed).some(([k, v]) => !/^\d+$/.test(k) || typeof v !== 'number' || v < -100 || v > 100)) {
      throw fieldError('p-logit-bias', 'an object of token id -> number from -100 to 100');
    }
    p.logit_bias = parsed;
  }
  p.response_format = $('p-format').value;
  p.json_schema = $('p-schema').value.trim();
  if (p.response_format === 'json_schema') {
    try {
      const s = JSON.parse(p.json_schema);
      if (!s || typeof s !== 'object') throw new Error();
    } catch { throw fieldError('p-schema', 'a JSON Schema object'); }
  }
  return p;
}

export function applyTheme() {
  const theme = settings.display().theme;
  if (theme === 'system') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
  window.dispatchEvent(new Event('k3-theme'));
}

// Limits and defaults from /props: max tokens can never exceed the context; an empty field
// shows the server's default.
export function applyLimits(props) {
  serverLimits = { n_ctx: props.n_ctx, max_prompt_tokens: props.max_prompt_tokens };
  serverDefaults = props.default_generation_settings || {};
  $('p-max-tokens').max = String(props.n_ctx);
  $('p-temperature').placeholder = serverDefaults.temperature !== undefined ? String(serverDefaults.temperature) + ' (server default)' : '';
  $('p-top-p').placeholder = serverDefaults.top_p !== undefined ? String(serverDefaults.top_p) + ' (server default)' : '';
  $('limits-note').textContent = 'Context ' + props.n_ctx + ' tokens (prompt at most ' + props.max_prompt_tokens +
    '), queue ' + props.queue_capacity + ' requests. Empty fields use the server\'s defaults. Parameters are kept in this browser.';
}

export function initSettings(onSaved) {
  const dialog = $('settings');
  $('open-settings').addEventListener('click', () => openSettings());
  $('settings-reset').addEventListener('click', () => fill({ ...DEFAULT_PARAMS }, { ...DEFAULT_DISPLAY }));
  $('p-format').addEventListener('change', () => { $('schema-row').hidden = $('p-format').value !== 'json_schema'; });
  $('settings-form').addEventListener('submit', (e) => {
    if (e.submitter && e.submitter.value !== 'save') return;
    try {
      settings.setParams(read());
      settings.setDisplay({ autoScroll: $('d-autoscroll').checked, reasoningOpen: $('d-reasoning').checked, theme: $('d-theme').value });
      settings.setApiKey($('api-key').value.trim());
      $('settings-error').textContent = '';
      applyTheme();
      onSaved();
    } catch (err) {
      e.preventDefault();
      $('settings-error').textContent = err.message;
    }
  });
  dialog.addEventListener('close', () => $('open-settings').focus());
  applyTheme();
}

export function openSettings() {
  fill(settings.params(), settings.display());
  $('settings-error').textContent = '';
  $('settings').showModal();
}
