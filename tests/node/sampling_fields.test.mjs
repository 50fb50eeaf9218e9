// The sampling fields agents and front-ends send, through the official `openai` SDK against the
// real HTTP layer and worker over the FakeEngine (greedy follows its script "Hello from the
// fake engine!" with logit 10, the next byte has 9): logit_bias, presence/frequency penalties,
// stop token ids, n > 1 whole and streamed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startDaemon } from './daemon.mjs';

let daemon, client;
before(async () => {
  daemon = await startDaemon('fake');
  client = new OpenAI({ baseURL: daemon.url + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => { assert.equal(await daemon.stop(), 0); });

const base = { model: 'fake', prompt: 'Say hello', max_tokens: 5, temperature: 0 };
const code = (s) => String(s.charCodeAt(0));

test('without adjustments greedy follows the script', async () => {
  const r = await client.completions.create(base);
  assert.equal(r.choices[0].text, 'Hello');
});

test('logit_bias moves greedy off a token', async () => {
  const r = await client.completions.create({ ...base, logit_bias: { [code('H')]: -100 } });
  assert.equal(r.choices[0].text[0], 'I');  // the next byte after 'H' (logit 9)
  const up = await client.completions.create({ ...base, max_tokens: 1, logit_bias: { [code('z')]: 50 } });
  assert.equal(up.choices[0].text, 'z');
});

test('penalties count what was generated: the second l loses to m', async () => {
  for (const field of ['frequency_penalty', 'presence_penalty']) {
    const r = await client.completions.create({ ...base, [field]: 2 });
    assert.equal(r.choices[0].text.slice(0, 4), 'Helm', field);
  }
  // Deterministic: the same request gives the same text.
  const again = await client.completions.create({ ...base, frequency_penalty: 2 });
  assert.equal(again.choices[0].text.slice(0, 4), 'Helm');
});

test('stop token ids end generation before the token', async () => {
  const r = await client.completions.create({ ...base, max_tokens: 10, stop_token_ids: [32] });
  assert.equal(r.choices[0].text, 'Hello');
  assert.equal(r.choices[0].finish_reason, 'stop');
  const mixed = await client.chat.completions.create({
    model: 'fake', messages: [{ role: 'user', content: 'hi' }], temperature: 0, stop: ['xyz', Number(code('f'))],
    reasoning_effort: 'none',  // the answer at once: these cases count its tokens
  });
  assert.equal(mixed.choices[0].message.content, 'Hello ');
});

test('n > 1: separate choices from one prompt, whole and streamed', async () => {
  const whole = await client.completions.create({ ...base, n: 3 });
  assert.deepEqual(whole.choices.map((c) => c.index), [0, 1, 2]);
  for (const c of whole.choices) assert.equal(c.text, 'Hello');
  assert.equal(whole.usage.completion_tokens, 15);
  const single = await client.completions.create(base);
  assert.equal(whole.usage.prompt_tokens, single.usage.prompt_tokens);  // the prompt counted once

  const stream = await client.chat.completions.create({
    model: 'fake', messages: [{ role: 'user', content: 'hi' }], temperature: 0, n: 2, max_tokens: 4, reasoning_effort: 'none',
    stream: true, stream_options: { include_usage: true },
  });
  const text = ['', ''];
  const finish = [null, null];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text[c.index] += c.delta?.content ?? '';
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  assert.deepEqual(text, ['Hell', 'Hell']);
  assert.deepEqual(finish, ['length', 'length']);
  assert.equal(usage.completion_tokens, 8);
});
