// The official Anthropic SDK (@anthropic-ai/sdk) against the stock daemon on the tiny
// random-weight model (docs/api.md, "Anthropic Messages API"): messages.create, messages.stream,
// a tool_use / tool_result round trip (tool_choice forces the call: the grammar keeps its input
// valid for the schema even from random weights), thinking with a signature that comes back in
// the history, and countTokens agreeing with the prompt a create call was charged for.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import Ajv from 'ajv';
import { startDaemon } from './daemon.mjs';

let daemon, client;
before(async () => {
  daemon = await startDaemon('tiny');
  client = new Anthropic({ baseURL: daemon.url, apiKey: 'unused', maxRetries: 0 });
});
after(async () => { assert.equal(await daemon.stop(), 0); });

const STOP_REASONS = ['end_turn', 'max_tokens', 'stop_sequence', 'tool_use'];
const weather = {
  name: 'get_weather',
  description: 'Weather for a city',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1, maximum: 7 } },
    required: ['city', 'days'],
    additionalProperties: false,
  },
};
const ask = [{ role: 'user', content: 'Weather in Paris for 3 days?' }];

function checkUsage(usage) {
  for (const k of ['input_tokens', 'output_tokens', 'cache_read_input_tokens'])
    assert.ok(Number.isInteger(usage[k]) && usage[k] >= 0, `usage.${k} = ${usage[k]}`);
}

test('messages.create: a message with text blocks, the model name echoed, usage', async () => {
  // Thinking off, so every block is text (a request without `thinking` thinks: docs/api.md).
  const m = await client.messages.create({ model: 'claude-opus-4-8', max_tokens: 16, messages: ask, temperature: 0,
    thinking: { type: 'disabled' } });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, 'claude-opus-4-8');
  assert.match(m.id, /^msg_/);
  assert.ok(STOP_REASONS.includes(m.stop_reason), m.stop_reason);
  for (const block of m.content) assert.equal(block.type, 'text');
  checkUsage(m.usage);
  assert.ok(m.usage.output_tokens >= 1 && m.usage.output_tokens <= 16);
  if (m.stop_reason === 'max_tokens') assert.equal(m.usage.output_tokens, 16);
});

test('messages.stream: events in order, and the assembled message equals the whole one', async () => {
  const req = { model: 'k3', max_tokens: 24, messages: ask, temperature: 0 };
  const whole = await client.messages.create(req);
  const stream = client.messages.stream(req);
  const types = [];
  let text = '';
  stream.on('streamEvent', (e) => types.push(e.type));
  stream.on('text', (t) => { text += t; });
  const final = await stream.finalMessage();
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  assert.equal(types.at(-2), 'message_delta');
  assert.equal(types.filter((t) => t === 'content_block_start').length, final.content.length);
  assert.equal(types.filter((t) => t === 'content_block_stop').length, final.content.length);
  assert.deepEqual(final.content, whole.content);
  assert.equal(text, whole.content.map((b) => b.text).join(''));
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
});

test('tool_use then tool_result: the call validates against input_schema, the next turn completes', async () => {
  const validate = new Ajv({ strict: false }).compile(weather.input_schema);
  for (const streamed of [false, true]) {
    const req = { model: 'k3', max_tokens: 200, messages: ask, tools: [weather],
      tool_choice: { type: 'tool', name: 'get_weather' } };
    const first = streamed ? await client.messages.stream(req).finalMessage() : await client.messages.create(req);
    assert.equal(first.stop_reason, 'tool_use');
    const calls = first.content.filter((b) => b.type === 'tool_use');
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'get_weather');
    assert.match(calls[0].id, /^toolu_/);
    assert.ok(validate(calls[0].input), JSON.stringify(validate.errors));
    const second = await client.messages.create({
      model: 'k3', max_tokens: 16, tools: [weather],
      messages: [...ask, { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: calls[0].id, content: '{"temp_c": 21}' }] }],
    });
    assert.ok(STOP_REASONS.includes(second.stop_reason));
    // The history up to the tool result is the first request's prompt plus its answer: cached.
    assert.ok(second.usage.cache_read_input_tokens > 0, JSON.stringify(second.usage));
  }
});

test('thinking: a thinking block with a signature, accepted back in the history', async () => {
  const req = { model: 'k3', max_tokens: 48, messages: ask, thinking: { type: 'enabled', budget_tokens: 32 } };
  const stream = client.messages.stream(req);
  const kinds = [];
  stream.on('streamEvent', (e) => { if (e.type === 'content_block_delta') kinds.push(e.delta.type); });
  const m = await stream.finalMessage();
  assert.equal(m.content[0].type, 'thinking');
  assert.match(m.content[0].signature, /^k3s1\./);
  assert.ok(kinds.includes('signature_delta'));
  // A signature_delta closes a thinking block: none comes after the first text delta.
  if (kinds.includes('text_delta')) assert.ok(kinds.lastIndexOf('signature_delta') < kinds.indexOf('text_delta'));
  const next = await client.messages.create({
    model: 'k3', max_tokens: 8, thinking: { type: 'enabled', budget_tokens: 32 },
    messages: [...ask, { role: 'assistant', content: m.content }, { role: 'user', content: 'And tomorrow?' }],
  });
  assert.equal(next.type, 'message');
  // display "omitted": the thinking text comes back empty and rides in the signature, so the
  // same history with the text blanked is the same prompt.
  const hidden = await client.messages.create({ ...req, thinking: { ...req.thinking, display: 'omitted' } });
  if (hidden.content[0]?.type === 'thinking') assert.equal(hidden.content[0].thinking, '');
  const history = (content) => ({ model: 'k3', thinking: { type: 'enabled', budget_tokens: 32 },
    messages: [...ask, { role: 'assistant', content }, { role: 'user', content: 'And tomorrow?' }] });
  const blanked = m.content.map((b) => (b.type === 'thinking' ? { ...b, thinking: '' } : b));
  assert.equal((await client.messages.countTokens(history(blanked))).input_tokens,
    (await client.messages.countTokens(history(m.content))).input_tokens);
});

test('countTokens: the input_tokens a create call with the same request was charged for', async () => {
  const req = { model: 'k3', messages: ask, tools: [weather], system: 'Be brief.' };
  const counted = await client.messages.countTokens(req);
  assert.ok(counted.input_tokens > 20);
  // What the model was given, cached or not.
  const m = await client.messages.create({ ...req, max_tokens: 1 });
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, counted.input_tokens);
  await assert.rejects(client.messages.countTokens({ model: 'k3', messages: [] }),
    (e) => e instanceof Anthropic.BadRequestError && /messages/.test(e.error.error.message));
});
