// The official `openai` npm package against the daemon: completions, chat, streaming, usage,
// and error handling (the SDK's typed errors for 400/401/404). Runs against the fake daemon
// (exact texts known) and, when K3_NODE_TINY=1 or the tiny model can be made, the real daemon.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startDaemon } from './daemon.mjs';

let daemon, client, promptsFile;

// The prompts the fake engine was given so far (the daemon records them, one JSON string a line).
function recordedPrompts() {
  return readFileSync(promptsFile, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
}

before(async () => {
  mkdirSync(process.env.K3_TEST_TMP, { recursive: true });
  const dir = mkdtempSync(path.join(process.env.K3_TEST_TMP, 'node-prompts-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  promptsFile = path.join(dir, 'prompts.jsonl');
  daemon = await startDaemon('fake', ['--api-key', 'test-key', '--record-prompts', promptsFile]);
  client = new OpenAI({ baseURL: daemon.url + '/v1', apiKey: 'test-key', maxRetries: 0 });
});
after(async () => { assert.equal(await daemon.stop(), 0); });

test('models.list shows the served model', async () => {
  const models = await client.models.list();
  assert.equal(models.data[0].id, 'fake');
});

test('chat.completions.create (README example)', async () => {
  const r = await client.chat.completions.create({
    model: 'fake',
    messages: [{ role: 'user', content: 'Say hello' }],
    temperature: 0,
    reasoning_effort: 'none',  // as the README's example: the answer at once, no thinking
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].message.content, 'Hello from the fake engine!');
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  // What the SDK sent reached the engine as K3's chat layout of that one user message.
  assert.equal(recordedPrompts().at(-1),
    '<|open|>message role="user"<|sep|>Say hello<|close|>message<|sep|><|end_of_msg|>' +
    '<|open|>message role="assistant"<|sep|><|open|>response<|sep|>');
});

test('chat streaming with include_usage', async () => {
  const stream = await client.chat.completions.create({
    model: 'fake',
    messages: [{ role: 'user', content: 'Say hello' }],
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let ids = new Set();
  for await (const chunk of stream) {
    ids.add(chunk.id);
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices.length) continue;
    text += chunk.choices[0].delta.content ?? '';
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal(text, 'Hello from the fake engine!');
  assert.equal(finish, 'stop');
  assert.equal(ids.size, 1);
  assert.ok(usage.completion_tokens > 0);
});

test('completions.create, streamed and not, with stop strings', async () => {
  const r = await client.completions.create({ model: 'fake', prompt: 'x', max_tokens: 5, temperature: 0 });
  assert.equal(r.choices[0].text, 'Hello');
  assert.equal(r.choices[0].finish_reason, 'length');
  const s = await client.completions.create({
    model: 'fake', prompt: 'x', max_tokens: 40, temperature: 0, stop: [' fake'], stream: true,
  });
  let text = '';
  for await (const chunk of s) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, 'Hello from the');
});

test('errors surface as the SDK typed errors', async () => {
  // Any model name is served by the loaded model and echoed back.
  const any = await client.chat.completions.create({ model: 'gpt-4', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] });
  assert.equal(any.model, 'gpt-4');
  await assert.rejects(
    client.chat.completions.create({ model: 'fake', messages: [] }),
    (e) => e instanceof OpenAI.BadRequestError && /must not be empty/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({ model: 'fake', messages: [{ role: 'user', content: 'x' }], temperature: 5 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
  await assert.rejects(
    client.completions.create({ model: 'fake', prompt: 'x', best_of: 3 }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'unsupported_parameter');
  const wrongKey = new OpenAI({ baseURL: daemon.url + '/v1', apiKey: 'nope', maxRetries: 0 });
  await assert.rejects(wrongKey.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
  // Still serving afterwards.
  const ok = await client.completions.create({ model: 'fake', prompt: 'x', max_tokens: 1, temperature: 0 });
  assert.equal(ok.choices[0].text, 'H');
});

test('aborting a stream cancels the job on the server', async () => {
  const slow = await startDaemon('fake', ['--token-delay-ms', '50']);
  try {
    const c = new OpenAI({ baseURL: slow.url + '/v1', apiKey: 'unused', maxRetries: 0 });
    const stream = await c.completions.create({ model: 'fake', prompt: 'x', max_tokens: 500, stream: true });
    let n = 0;
    for await (const chunk of stream) { if (++n === 3) break; }  // break aborts the request
    let cancelled = false;
    for (let i = 0; i < 100 && !cancelled; i++) {
      const m = await (await fetch(slow.url + '/metrics')).text();
      cancelled = m.includes('k3serve:requests_total{outcome="cancelled"} 1');
      if (!cancelled) await new Promise((res) => setTimeout(res, 50));
    }
    assert.ok(cancelled, 'the server counted the cancelled request');
  } finally {
    await slow.stop();
  }
});
