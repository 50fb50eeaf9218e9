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
  } catch {
    failures++;
    next = Math.min(10000, 1000 * 2 ** Math.min(failures - 1, 4));
    callbacks.onUnreachable(next);
  }
  pollSoon(next);
}

function accept(status) {
  latest = status;
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
  const req = (status.active && status.active[0]) || status.last_request;
  const set = (id, text) => { const el = $(id); if (el.textContent !== text) el.textContent = text; };
  set('fig-ttft', req ? formatSeconds(req.time_to_first_token_s) : '–');
  set('fig-prompt-rate', req && req.prompt_tokens_per_s !== null ? formatRate(req.prompt_tokens_per_s) : '–');
  set('fig-spt', req ? formatSeconds(req.seconds_per_token) : '–');
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
  pollSoon(0);
}
