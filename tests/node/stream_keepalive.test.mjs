// Every streamed API keeps the connection alive while its request waits in the queue or in
// prefill (docs/api.md, "Streaming"): OpenAI's chat and completions and the Responses API send
// `: ping` comments, the Messages API `event: ping` (Anthropic clients count only events, and
// drop a stream silent for 300 s). The real daemon on the tiny model reads prompts in small
// chunks (--prefill-mb 0.25) and the worker's test hook (K3_TEST_HOLD_PREFILL,
// docs/development.md) holds a prefill between two chunks while the file exists, so the test
// waits on states, not on time: it reads each stream until two keep-alives came while
// /v1/status shows the prompt still being read, then lets the prefill go and reads the answer
// to its end. The interval is --sse-ping-s (5 s by default; 0.2 s here, so the test is quick).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, scratchDir } from './daemon.mjs';

const hold = path.join(scratchDir('keepalive'), 'hold');
let daemon;
before(async () => {
  process.env.K3_TEST_HOLD_PREFILL = hold;
  try {
    daemon = await startDaemon('tiny', ['--prefill-mb', '0.25', '--sse-ping-s', '0.2', '--parallel', '1']);
  } finally { delete process.env.K3_TEST_HOLD_PREFILL; }
});
after(async () => { assert.equal(await daemon.stop(), 0); });

// Each request's prompt differs from its start, so none resumes another's from the prompt cache
// (a resumed prompt may be read in one chunk, leaving nothing to hold).
const longText = (name) => name + ' ' + Array.from({ length: 60 }, (_, i) => 'word' + (i % 10)).join(' ');
const status = async () => (await fetch(daemon.url + '/v1/status')).json();

// A streamed request, read as it arrives: `text` grows, `until(pred)` resolves once pred(text).
function open(route, body) {
  const s = { text: '', ended: false, waiters: [] };
  s.done = fetch(daemon.url + route, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'unused' },
    body: JSON.stringify({ ...body, stream: true }),
  }).then(async (res) => {
    assert.equal(res.status, 200);
    const decoder = new TextDecoder();
    for await (const chunk of res.body) {
      s.text += decoder.decode(chunk, { stream: true });
      s.waiters = s.waiters.filter((w) => !(w.pred(s.text) && (w.resolve(), true)));
    }
    s.ended = true;
    s.waiters.forEach((w) => w.reject(new Error(`the stream ended first:\n${s.text.slice(-2000)}`)));
  });
  s.until = (pred) => new Promise((resolve, reject) => {
    if (pred(s.text)) return resolve();
    if (s.ended) return reject(new Error(`the stream ended first:\n${s.text.slice(-2000)}`));
    s.waiters.push({ pred, resolve, reject });
  });
  return s;
}

// Waits until the running request's prompt is held mid-way (polling the state, not a time).
async function heldMidPrompt(stream) {
  for (;;) {
    const p = (await status()).active?.[0]?.prefill;
    if (p && p.chunks_done >= 1 && p.done_tokens < p.total_tokens) return;
    assert.ok(!stream.ended, `the request ended without being held:\n${stream.text.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const count = (text, marker) => text.split(marker).length - 1;

const apis = [
  ['chat completions', '/v1/chat/completions', { model: 'k3', max_tokens: 2, messages: [{ role: 'user', content: longText('chat') }] }, ': ping\n\n'],
  ['completions', '/v1/completions', { model: 'k3', max_tokens: 2, prompt: longText('completions') }, ': ping\n\n'],
  ['responses', '/v1/responses', { model: 'k3', max_output_tokens: 2, input: longText('responses') }, ': ping\n\n'],
  ['messages', '/v1/messages', { model: 'claude-x', max_tokens: 2, messages: [{ role: 'user', content: longText('messages') }] }, 'event: ping\n'],
];

for (const [name, route, body, marker] of apis) {
  test(`${name}: keep-alives while the prompt is read`, async () => {
    writeFileSync(hold, '');
    const s = open(route, body);
    // Held mid-prompt: part of it read, and it stays there while the file exists.
    await heldMidPrompt(s);
    // Messages' stream opens with one ping of its own (after message_start): two more are the
    // keep-alives.
    const want = count(marker, 'event: ping') ? 3 : 2;
    await s.until((t) => count(t, marker) >= want);
    const p = (await status()).active?.[0]?.prefill;
    assert.ok(p && p.done_tokens < p.total_tokens, `the prompt was no longer being read: ${JSON.stringify(p)}`);
    rmSync(hold);
    await s.done;
    assert.match(s.text, route === '/v1/messages' ? /event: message_stop/ : route === '/v1/responses' ? /response\.completed|response\.incomplete/ : /data: \[DONE\]/);
  });
}

test('a queued request keeps its stream alive too, behind one held in prefill', async () => {
  writeFileSync(hold, '');
  const first = open('/v1/chat/completions', { ...apis[0][2], messages: [{ role: 'user', content: longText('first') }] });
  await heldMidPrompt(first);
  const second = open('/v1/messages', { ...apis[3][2], messages: [{ role: 'user', content: longText('second') }] });
  while ((await status()).queue.depth < 1) await new Promise((r) => setTimeout(r, 50));
  await second.until((t) => count(t, 'event: ping\n') >= 3);
  const st = await status();
  assert.equal(st.queue.depth, 1, `the second request was no longer queued: ${JSON.stringify(st)}`);
  rmSync(hold);
  await Promise.all([first.done, second.done]);
  assert.match(second.text, /event: message_stop/);
});
