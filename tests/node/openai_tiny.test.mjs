// The official `openai` npm package against the real daemon (`k3serve serve`) on the tiny
// synthetic model: chat and completions, streamed and not (greedy, so both must agree), usage,
// the reused-prefix count of a second turn, and errors from the real validation path.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startDaemon } from './daemon.mjs';

let daemon, client, model;

before(async () => {
  daemon = await startDaemon('tiny');
  client = new OpenAI({ baseURL: daemon.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  model = (await client.models.list()).data[0].id;
});
after(async () => { assert.equal(await daemon.stop(), 0); });

test('chat: streamed text equals the non-streamed text', async () => {
  const messages = [{ role: 'user', content: 'Tell me about the sea.' }];
  const whole = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0 });
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.ok(whole.usage.completion_tokens > 0 && whole.usage.completion_tokens <= 20);
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 20, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

test('chat: the second turn reuses the first one', async () => {
  const turn1 = [{ role: 'user', content: 'Name a colour.' }];
  const a = await client.chat.completions.create({ model, messages: turn1, max_tokens: 8, temperature: 0 });
  const turn2 = [...turn1, { role: 'assistant', content: a.choices[0].message.content },
    { role: 'user', content: 'And another one?' }];
  const b = await client.chat.completions.create({ model, messages: turn2, max_tokens: 8, temperature: 0 });
  assert.ok(b.usage.prompt_tokens_details.cached_tokens > a.usage.prompt_tokens / 2);
});

test('completions: seed reproduces, errors are typed', async () => {
  const req = { model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0.8, seed: 99 };
  const x = await client.completions.create(req);
  const y = await client.completions.create(req);
  assert.equal(x.choices[0].text, y.choices[0].text);
  await assert.rejects(client.completions.create({ model, prompt: 'x', max_tokens: 10_000_000 }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded');
});
