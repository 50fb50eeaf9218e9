// Every streamed API keeps the stream alive while its request waits in the queue or in prefill
// with events its official SDK hands to the caller (docs/agents.md, "Prefills longer than a
// client's patience"): the agents' idle watchdogs count those, not bytes or SSE comments. Read
// here through the SDKs themselves (openai for chat, completions and Responses, @anthropic-ai/sdk
// for Messages): what the caller's loop receives while the prompt is held. The keep-alives add
// nothing: the answer the SDK assembles from the stream is the one the same request gets
// unstreamed (same text, stop reason and token counts), every chunk carries the answer's id, and
// Messages' message_start already has the prompt's real figures (known before the prefill).
//
// The real daemon on the tiny model reads prompts in small chunks (--prefill-mb 0.25) and the
// worker's test hook (--test-hold-prefill, docs/development.md) holds a prefill between two
// chunks while the file exists, so the test waits on states, not on time: it reads each stream
// until two keep-alives came while /v1/status shows the prompt still being read, then lets the
// prefill go and reads the answer to its end. The interval is --sse-ping-s (5 s by default;
// 0.2 s here, so the test is quick).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { startDaemon, scratchDir } from './daemon.mjs';

const hold = path.join(scratchDir('keepalive'), 'hold');
let daemon, openai, anthropic;
before(async () => {
  daemon = await startDaemon('tiny', ['--prefill-mb', '0.25', '--sse-ping-s', '0.2', '--parallel', '1',
    '--test-hold-prefill', hold]);
  openai = new OpenAI({ baseURL: daemon.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: daemon.url, apiKey: 'unused', maxRetries: 0 });
});
after(async () => { assert.equal(await daemon.stop(), 0); });

// Each request's prompt differs from its start, so none resumes another's from the prompt cache
// (a resumed prompt may be read in one chunk, leaving nothing to hold).
const longText = (name) => name + ' ' + Array.from({ length: 60 }, (_, i) => 'word' + (i % 10)).join(' ');
const status = async () => (await fetch(daemon.url + '/v1/status')).json();
const pause = (ms) => new Promise((r) => setTimeout(r, ms));

// Reads an SDK stream in the background: `items` grows; until(pred) resolves once pred(items).
function reader(iterable) {
  const r = { items: [], ended: false, waiters: [] };
  r.done = (async () => {
    try {
      for await (const item of iterable) {
        r.items.push(item);
        r.waiters = r.waiters.filter((w) => !(w.pred(r.items) && (w.resolve(), true)));
      }
    } finally {
      r.ended = true;
      r.waiters.forEach((w) => w.reject(new Error(`the stream ended first: ${JSON.stringify(r.items).slice(-2000)}`)));
    }
  })();
  r.until = (pred) => new Promise((resolve, reject) => {
    if (pred(r.items)) return resolve();
    if (r.ended) return reject(new Error(`the stream ended first: ${JSON.stringify(r.items).slice(-2000)}`));
    r.waiters.push({ pred, resolve, reject });
  });
  return r;
}

// Waits until the running request's prompt is held mid-way (polling the state, not a time).
async function heldMidPrompt(r) {
  for (;;) {
    const p = (await status()).active?.[0]?.prefill;
    if (p && p.chunks_done >= 1 && p.done_tokens < p.total_tokens) return;
    assert.ok(!r.ended, 'the request ended without being held');
    await pause(50);
  }
}
async function stillMidPrompt() {
  const p = (await status()).active?.[0]?.prefill;
  assert.ok(p && p.done_tokens < p.total_tokens, `the prompt was no longer being read: ${JSON.stringify(p)}`);
}

// Holds the prompt of the request `open()` sends, reads its stream through the SDK until
// `isKeepAlive` counted two (more than `before` at the start) while the prompt is still being
// read, then lets it go.
async function readHeld(open, isKeepAlive, before = 0) {
  writeFileSync(hold, '');
  const r = reader(await open());
  await heldMidPrompt(r);
  const seen = r.items.filter(isKeepAlive).length;
  await r.until((items) => items.filter(isKeepAlive).length >= Math.max(seen, before) + 2);
  await stillMidPrompt();
  rmSync(hold);
  await r.done;
  return r.items;
}

const body = (name) => ({ model: 'k3', max_tokens: 4, temperature: 0, messages: [{ role: 'user', content: longText(name) }] });

test('chat completions: empty delta chunks while the prompt is read; the answer unchanged', async () => {
  const stream = () => openai.chat.completions.stream({ ...body('chat'), stream_options: { include_usage: true } });
  let s;
  const chunks = await readHeld(() => (s = stream()), (c) => c.choices?.[0] && Object.keys(c.choices[0].delta).length === 0
    && c.choices[0].finish_reason === null);
  const streamed = await s.finalChatCompletion();
  assert.ok(chunks.every((c) => c.id === streamed.id), 'a chunk with another id');
  const whole = await openai.chat.completions.create(body('chat'));
  assert.equal(streamed.choices[0].message.content, whole.choices[0].message.content);
  assert.equal(streamed.choices[0].finish_reason, whole.choices[0].finish_reason);
  const usage = chunks.at(-1).usage;
  assert.equal(usage.prompt_tokens, whole.usage.prompt_tokens);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

test('completions: empty text chunks while the prompt is read; the answer unchanged', async () => {
  const b = { model: 'k3', max_tokens: 4, temperature: 0, prompt: longText('completions') };
  const chunks = await readHeld(() => openai.completions.create({ ...b, stream: true }), (c) => c.choices?.[0]?.text === '' && c.choices[0].finish_reason === null);
  assert.ok(chunks.every((c) => c.id === chunks[0].id), 'a chunk with another id');
  const whole = await openai.completions.create(b);
  assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), whole.choices[0].text);
});

test('responses: response.in_progress again while the prompt is read; the answer unchanged', async () => {
  const b = { model: 'k3', max_output_tokens: 4, temperature: 0, input: longText('responses') };
  let stream;
  // (the stream's own opening in_progress is not a keep-alive)
  const events = await readHeld(() => (stream = openai.responses.stream(b)), (e) => e.type === 'response.in_progress', 1);
  const streamed = await stream.finalResponse();
  assert.ok(events.filter((e) => e.response).every((e) => e.response.id === streamed.id), 'an event of another response');
  const whole = await openai.responses.create(b);
  assert.equal(streamed.output_text, whole.output_text);
  assert.equal(streamed.status, whole.status);
  assert.equal(streamed.usage.input_tokens, whole.usage.input_tokens);
  assert.equal(streamed.usage.output_tokens, whole.usage.output_tokens);
});

test('messages: message_delta without a stop_reason while the prompt is read; real figures in message_start', async () => {
  const b = { ...body('messages'), model: 'claude-x' };
  let stream;
  const events = await readHeld(() => (stream = anthropic.messages.stream(b)),
    (e) => e.type === 'message_delta' && e.delta.stop_reason === null);
  const streamed = await stream.finalMessage();
  const start = events.find((e) => e.type === 'message_start').message;
  const whole = await anthropic.messages.create(b);
  assert.deepEqual(streamed.content, whole.content);
  assert.equal(streamed.stop_reason, whole.stop_reason);
  const total = (u) => u.input_tokens + u.cache_read_input_tokens;
  assert.equal(total(streamed.usage), total(whole.usage));
  assert.equal(streamed.usage.output_tokens, whole.usage.output_tokens);
  assert.equal(total(start.usage), total(whole.usage), JSON.stringify(start.usage));
  // The same prompt again, streamed: message_start tells what is read from the prompt cache,
  // as the final usage does.
  const again = [];
  for await (const e of anthropic.messages.stream(b)) again.push(e);
  const againStart = again.find((e) => e.type === 'message_start').message.usage;
  const againEnd = again.findLast((e) => e.type === 'message_delta').usage;
  assert.ok(againStart.cache_read_input_tokens > 0, JSON.stringify(againStart));
  assert.equal(againStart.cache_read_input_tokens, againEnd.cache_read_input_tokens);
  assert.equal(againStart.input_tokens, againEnd.input_tokens);
});

test('a queued request keeps its stream alive too, behind one held in prefill', async () => {
  writeFileSync(hold, '');
  const first = reader(openai.chat.completions.stream(body('first')));
  await heldMidPrompt(first);
  const second = reader(anthropic.messages.stream({ ...body('second'), model: 'claude-x' }));
  while ((await status()).queue.depth < 1) await pause(50);
  await second.until((items) => items.filter((e) => e.type === 'message_delta').length >= 2);
  const st = await status();
  assert.equal(st.queue.depth, 1, `the second request was no longer queued: ${JSON.stringify(st)}`);
  rmSync(hold);
  await Promise.all([first.done, second.done]);
  assert.equal(second.items.at(-1).type, 'message_stop');
});
