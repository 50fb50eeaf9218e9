// Live engine figures: polls GET /v1/status (about once a second, faster while a request runs),
// fills the figures panel and the chart, and tells the rest of the page about the daemon's
// state (loading, ready, unreachable) through the callbacks given to startFigures.
import { headers } from './api.js';
import { drawChart } from './chart.js';
import { formatBytes, formatDuration, formatPercent, formatRate, formatSeconds } from './format.js';

const KEPT = 300;               // tokens shown in the chart
let samples = [];               // [{seq, request, seconds, trunk_bytes, expert_bytes, io_seconds}]
let lastSeq = 0;
let latest = null;              // the last /v1/status answer
let busy = false;               // a request of this page is running: poll faster
let failures = 0;
let timer = null;
let callbacks = { onStatus() {}, onUnreachable() {} };

const $ = (id) => document.getElementById(id);

const mine = new Set();          // ids of this page's requests, as far as it can tell
let highestSeen = 0;             // the highest request id any status showed
let sent = null;                 // {after: highestSeen when the page began sending, count, settled}
let pollsAsked = 0;              // polls sent so far; a status answers the poll it was asked by

// Requests get ids in order (one counter in the daemon). This page's request is the one that
// runs while it waits with nothing else running or queued; or, for one too quick to be seen
// running, the ones the page sent when exactly that many requests came after the highest id it
// knew before sending and nothing else runs now (another client's request would make one more).
// That count is judged only from a status asked for after the page's requests ended: one asked
// for earlier (still in flight when a quick answer ended) may not show them yet.
function noteMine(status, asked) {
  const active = status.active || [];
  const ids = active.map((a) => a.id).concat(status.last_request ? [status.last_request.id] : []).filter((id) => id !== undefined);
  const newest = Math.max(highestSeen, ...ids);
  if (busy && !(status.queue && status.queue.depth > 0) && active.length === 1 && active[0].id !== undefined) mine.add(active[0].id);
  if (sent && sent.settled !== undefined && asked > sent.settled) {
    if (active.length === 0 && !(status.queue && status.queue.depth > 0) && newest - sent.after === sent.count)
      for (let id = sent.after + 1; id <= newest; id++) mine.add(id);
    sent = null;
  }
  highestSeen = newest;
}

// The page sends a request (before it is sent).
export function noteSent() {
  if (!sent) sent = { after: highestSeen, count: 0 };
  sent.count++;
}

// The running request that is this page's: one noted as this page's, else the only one running
// while nothing waits (what noteMine would note). null when the page cannot tell.
export function thisPagesRequest() {
  const active = (latest && latest.active) || [];
  const known = active.find((a) => mine.has(a.id));
  if (known) return known;
  return busy && active.length === 1 && !(latest.queue && latest.queue.depth > 0) ? active[0] : null;
}

const count = (n) => Number(n).toLocaleString('en');

// "1,200 of 5,000 tokens (800 cached), 35.2 tokens/s, about 1 min 48 s left" from a request's
// prefill progress (/v1/status active[].prefill, docs/api.md#prefill-progress). The time left
// is the server's eta_s (the rest of the prompt at the rate so far); a wait of a minute or more
// also says the clock time it should end.
export function prefillProgress(p) {
  let text = count(p.done_tokens) + ' of ' + count(p.total_tokens) + ' tokens';
  if (p.cached_tokens > 0) text += ' (' + count(p.cached_tokens) + ' cached)';
  if (p.tokens_per_s) text += ', ' + formatRate(p.tokens_per_s) + ' tokens/s';
  if (p.eta_s > 0) {
    text += ', about ' + formatDuration(p.eta_s) + ' left';
    if (p.eta_s >= 60) text += ' (until ' + new Date(Date.now() + p.eta_s * 1000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) + ')';
  }
  return text;
}

// A request of this page started or ended: poll now, so the figures follow at once.
export function setBusy(b) {
  busy = b;
  if (sent) sent.settled = b ? undefined : pollsAsked;
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
  const asked = ++pollsAsked;
  try {
    const r = await fetch('/v1/status?since=' + lastSeq, { headers: headers(), cache: 'no-store' });
    if (r.status === 401) {
      callbacks.onStatus(null, 401);
    } else if (!r.ok) {
      throw new Error('HTTP ' + r.status);
    } else {
      const status = await r.json();
      failures = 0;
      accept(status, asked);
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

function accept(status, asked) {
  lastUpdate = new Date();
  latest = status;
  noteMine(status, asked);
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
    set('prefill-text', 'Reading the prompt: ' + prefillProgress(p));
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
