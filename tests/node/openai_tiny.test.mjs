// The official `openai` npm package against the real daemon (`k3serve serve`) on the tiny
// synthetic model: chat and completions, streamed and not (greedy, so both must agree), usage,
// the reused-prefix count of a second turn, errors from the real validation path, n > 1, and
// required/named tool calls held to their schemas by constrained decoding.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv from 'ajv';
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
  // An output limit over the context is lowered to what it leaves (and said in a header).
  const { data, response } = await client.completions.create({ model, prompt: 'x', max_tokens: 10_000_000, temperature: 0 }).withResponse();
  assert.match(response.headers.get('x-k3-max-tokens-clamped'), /^max_tokens=10000000; granted=\d+$/);
  assert.ok(data.usage.completion_tokens >= 1);
});

test('n > 1 on the real engine: the prompt is evaluated once for all choices', async () => {
  const evaluated = async () => Number((await (await fetch(daemon.url + '/metrics')).text())
    .match(/^k3serve:tokens_evaluated_total (\d+)/m)[1]);
  const prompt = `A prompt nobody sent before (${Date.now()}), long enough to count: the quick brown fox jumps over the lazy dog.`;
  const before = await evaluated();
  const r = await client.completions.create({ model, prompt, max_tokens: 3, n: 3, temperature: 0.9, seed: 7 });
  const spent = (await evaluated()) - before;
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  assert.equal(r.usage.completion_tokens, r.choices.length * 3);
  // One prompt evaluation, 2 decode steps per choice, and at most a few positions recomputed
  // when a later choice resumes from the prompt's snapshot; three prompt evaluations would be
  // more than 3 * prompt_tokens.
  assert.ok(spent >= r.usage.prompt_tokens, `${spent}`);
  assert.ok(spent < r.usage.prompt_tokens + 3 * 2 + 3 * 4, `evaluated ${spent} for a ${r.usage.prompt_tokens}-token prompt`);
  // The same seed gives the same choices.
  const again = await client.completions.create({ model, prompt, max_tokens: 3, n: 3, temperature: 0.9, seed: 7 });
  assert.deepEqual(again.choices.map((c) => c.text), r.choices.map((c) => c.text));
});

test('four concurrent streams (--parallel 4, batched) each give the text they give alone', async () => {
  const prompts = ['The sea is', 'Once upon a time', 'Numbers: 1 2 3', 'x'];
  const req = (prompt) => ({ model, prompt, max_tokens: 40, temperature: 0 });
  const alone = [];
  for (const p of prompts) alone.push((await client.completions.create(req(p))).choices[0].text);
  const together = await Promise.all(prompts.map(async (p) => {
    const stream = await client.completions.create({ ...req(p), stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    return text;
  }));
  assert.deepEqual(together, alone);
  const slots = await (await fetch(daemon.url + '/slots')).json();
  assert.equal(slots.slots.length, 4);
});

// tool_choice "required" and a named function: random weights cannot choose tools, so the
// constraint is the test. Every answer must be a call to a declared tool (the named one when
// named) whose arguments validate against the tool's JSON schema (ajv); the SDK's stream helper
// assembles the same calls as the whole response with the same seed; a full agent loop reuses
// the first turn's cached prompt.
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city',
    parameters: { type: 'object', additionalProperties: false, required: ['city', 'unit'],
      properties: { city: { type: 'string', maxLength: 12 }, unit: { type: 'string', enum: ['C', 'F'] },
        days: { type: 'integer', minimum: 1, maximum: 7 } } } } },
  { type: 'function', function: { name: 'add', description: 'Add numbers',
    parameters: { type: 'object', additionalProperties: false, required: ['numbers'],
      properties: { numbers: { type: 'array', items: { type: 'number', minimum: -100, maximum: 100 }, maxItems: 3 },
        exact: { type: 'boolean' } } } } },
];
const validators = Object.fromEntries(tools.map((t) => [t.function.name, new Ajv().compile(t.function.parameters)]));

function checkCalls(message, names) {
  assert.ok(message.tool_calls && message.tool_calls.length >= 1, JSON.stringify(message));
  for (const call of message.tool_calls) {
    assert.ok(names.includes(call.function.name), call.function.name);
    const args = JSON.parse(call.function.arguments);
    const validate = validators[call.function.name];
    assert.ok(validate(args), `${call.function.arguments}: ${JSON.stringify(validate.errors)}`);
  }
}

test('tool_choice required: a declared tool, arguments valid for its schema, over several seeds', async () => {
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'Use a tool.' }], tools, tool_choice: 'required',
      temperature: 1, seed, max_tokens: 200,
    });
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    checkCalls(r.choices[0].message, ['get_weather', 'add']);
  }
});

test('a named function is the one called; streamed deltas assemble into the same calls', async () => {
  const req = {
    model, messages: [{ role: 'user', content: 'Add something.' }], tools,
    tool_choice: { type: 'function', function: { name: 'add' } }, temperature: 1, seed: 11, max_tokens: 200,
  };
  const whole = await client.chat.completions.create(req);
  checkCalls(whole.choices[0].message, ['add']);
  const final = await client.chat.completions.stream(req).finalChatCompletion();
  const strip = (m) => m.tool_calls.map((c) => [c.function.name, c.function.arguments]);
  assert.deepEqual(strip(final.choices[0].message), strip(whole.choices[0].message));
});

test('agent loop: call, tool result, next turn reuses the cached prompt', async () => {
  const messages = [{ role: 'user', content: 'What is the weather?' }];
  const first = await client.chat.completions.create({
    model, messages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
    temperature: 0, max_tokens: 200,
  });
  checkCalls(first.choices[0].message, ['get_weather']);
  messages.push(first.choices[0].message);
  for (const call of first.choices[0].message.tool_calls)
    messages.push({ role: 'tool', tool_call_id: call.id, content: '{"temp":21}' });
  const second = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', temperature: 0, max_tokens: 200 });
  checkCalls(second.choices[0].message, ['get_weather', 'add']);
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens,
    `${second.usage.prompt_tokens_details.cached_tokens} < ${first.usage.prompt_tokens}`);
});
