// Live engine figures: polls GET /v1/status (about once a second, faster while a request runs),
// fills the figures panel and the chart, and tells the rest of the page about the daemon's
// state (loading, ready, unreachable) through the callbacks given to startFigures.
import { headers } from './api.js';
import { drawChart } from './chart.js';
import { formatBytes, formatPercent, formatRate, formatSeconds } from './format.js';

const KEPT = 300;               // tokens shown in the chart
let samples = [];               // [{seq, request, seconds, trunk_bytes, expert_bytes, io_seconds}]
let lastSeq = 0;
let latest = null;              // the last /v1/status answer
let busy = false;               // a request of this page is running: poll faster
let failures = 0;
let timer = null;
let callbacks = { onStatus() {}, onUnreachable() {} };

const $ = (id) => document.getElementById(id);

export function latestStatus() { return latest; }

const mine = new Set();          // ids of this page's requests, as far as it can tell

// This page's request is the one that became active while it waited (the figures say "this page").
function noteMine(status) {
  // Only when nothing else waits and one request runs: then the running one must be this page's.
  const active = status.active || [];
  if (!busy || (status.queue && status.queue.depth > 0) || active.length !== 1) return;
  if (active[0].id !== undefined) mine.add(active[0].id);
}

// A request of this page started or ended: poll now, so the figures follow at once.
export function setBusy(b) {
  busy = b;
  pollSoon(b ? 0 : 100);
}

// This page's request waited `waitedSeconds` so far; requests that waited longer are ahead
// of it (the queue is first come, first served). null when the queue looks empty.
export function queuePosition(waitedSeconds) {
  if (!latest || !latest.queue || latest.queue.depth === 0) return null;
  const ahead = latest.queue.waiting_s.filter((w) => w > waitedSeconds + 0.3).length;
  return Math.min(ahead + 1, latest.queue.depth);
}

function pollSoon(ms) {
  clearTimeout(timer);
  timer = setTimeout(poll, ms);
}

export function retryNow() {
  failures = 0;
  pollSoon(0);
}

async function poll() {
  let next = busy ? 500 : 1500;
  try {
    const r = await fetch('/v1/status?since=' + lastSeq, { headers: headers(), cache: 'no-store' });
    if (r.status === 401) {
      callbacks.onStatus(null, 401);
    } else if (!r.ok) {
      throw new Error('HTTP ' + r.status);
    } else {
      const status = await r.json();
      failures = 0;
      accept(status);
      callbacks.onStatus(status, 200);
      if (status.phase === 'loading') next = 500;
    }
    setStale(false);
  } catch {
    failures++;
    setStale(true);
    next = Math.min(10000, 1000 * 2 ** Math.min(failures - 1, 4));
    callbacks.onUnreachable(next);
  }
  pollSoon(next);
}

// While the daemon cannot be reached the figures are the last ones read: say so, and grey them.
function setStale(stale) {
  const panel = $('figures');
  if (stale === (panel.dataset.stale === 'true')) return;
  panel.dataset.stale = String(stale);
  $('figures-stale').hidden = !stale;
  if (stale) $('figures-stale').textContent = 'Not updated since ' + (lastUpdate ? lastUpdate.toLocaleTimeString() : 'the page opened') +
    ': the server cannot be reached.';
}

let lastUpdate = null;

function accept(status) {
  lastUpdate = new Date();
  latest = status;
  noteMine(status);
  for (const t of status.tokens || []) {
    samples.push(t);
    lastSeq = Math.max(lastSeq, t.seq);
  }
  if (samples.length > KEPT) samples = samples.slice(samples.length - KEPT);
  render(status);
}

// Averages over the newest samples of one request (the running one, else the last one).
function recentAverages() {
  if (samples.length === 0) return null;
  const request = samples[samples.length - 1].request;
  const mine = samples.filter((s) => s.request === request).slice(-32);
  const sum = (f) => mine.reduce((a, s) => a + f(s), 0);
  const seconds = sum((s) => s.seconds);
  return {
    trunk: sum((s) => s.trunk_bytes) / mine.length,
    experts: sum((s) => s.expert_bytes) / mine.length,
    ioShare: seconds > 0 ? sum((s) => s.io_seconds) / seconds : null,
  };
}

function render(status) {
  const running = status.active && status.active[0];
  const req = running || status.last_request;
  const set = (id, text) => { const el = $(id); if (el.textContent !== text) el.textContent = text; };
  // Whose request the figures describe: the daemon serves every client, not only this page.
  set('fig-whose', req ? (running ? 'Running request #' : 'Last request #') + req.id +
    (req.id !== undefined && mine.has(req.id) ? ' (this page)' : '') : 'No request yet');
  set('fig-ttft', req ? formatSeconds(req.time_to_first_token_s) : '–');
  set('fig-prompt-rate', req && req.prompt_tokens_per_s !== null ? formatRate(req.prompt_tokens_per_s) : '–');
  set('fig-spt', req && Number.isFinite(req.seconds_per_token) && req.seconds_per_token > 0
    ? formatSeconds(req.seconds_per_token) + ' (' + formatRate(1 / req.seconds_per_token) + ' tokens/s)' : '–');
  const p = running && running.stage === 'prompt' ? running.prefill : null;
  $('prefill').hidden = !(p && p.total_tokens);
  if (p && p.total_tokens) {
    $('prefill-bar').max = p.total_tokens;
    $('prefill-bar').value = p.done_tokens;
    const left = p.tokens_per_s > 0 ? (p.total_tokens - p.done_tokens) / p.tokens_per_s : null;
    set('prefill-text', 'Reading the prompt: ' + p.done_tokens + ' of ' + p.total_tokens + ' tokens' +
      (p.tokens_per_s ? ', ' + formatRate(p.tokens_per_s) + ' tokens/s' : '') +
      (left !== null ? ', done in about ' + formatSeconds(left) : ''));
  }
  set('fig-cached', req && req.cached_tokens !== null ? req.cached_tokens + ' of ' + req.prompt_tokens : '–');
  const avg = recentAverages();
  set('fig-trunk', avg ? formatBytes(avg.trunk) : '–');
  set('fig-experts', avg ? formatBytes(avg.experts) : '–');
  const e = status.engine || {};
  set('fig-io', formatPercent(avg && avg.ioShare !== null ? avg.ioShare : e.io_share));
  set('fig-retention', e.expert_requests > 0 ? formatPercent(e.expert_hit_ratio) : 'no experts read yet');
  const m = status.memory || {};
  // Resident memory of the whole process, next to what the memory plan gives the weights.
  set('fig-memory', formatBytes(m.rss_bytes) + ' resident' + (m.plan_bytes ? ', weights plan ' + formatBytes(m.plan_bytes) : ''));
  const q = status.queue || { depth: 0, capacity: 0 };
  set('fig-queue', q.depth + ' waiting (of ' + q.capacity + ')');
  const active = status.active || [];
  set('fig-active', active.length === 0 ? 'none' : active.map((a) =>
    '#' + a.id + ' ' + (a.stage === 'prompt' ? 'reading the prompt (' + a.prompt_tokens + ' tokens)'
      : a.generated_tokens + ' tokens generated')).join('; '));
  $('figure-list').dataset.updated = String(Date.now());
  drawChart($('chart'), samples);
  set('chart-range', samples.length ? '(last ' + samples.length + ' tokens)' : '');
}

export function startFigures(cb) {
  callbacks = { ...callbacks, ...cb };
  window.addEventListener('resize', () => drawChart($('chart'), samples));
  window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => drawChart($('chart'), samples));
  window.addEventListener('k3-theme', () => drawChart($('chart'), samples));
  // The chart could not be drawn while its drawer was closed: draw it when it is shown.
  new ResizeObserver(() => drawChart($('chart'), samples)).observe($('chart'));
  pollSoon(0);
}
