// Tool calls through the official `openai` SDK against the real HTTP layer and worker over the
// FakeEngine, whose output is scripted as raw K3 XTML (k3serve_fake_daemon --xtml): the parsed
// calls, the SDK's streaming helper assembling the deltas into the same calls as the whole
// response, an agent loop that sends the reply back as history (refusal, annotations, tool
// calls) with a tool result, legacy `functions`, and a malformed call degrading to content.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { startDaemon } from './daemon.mjs';

const CALL_TURN =
  'Let me check.<|close|>response<|sep|><|open|>tools<|sep|>' +
  '<|open|>call tool="get_weather" index="1"<|sep|>' +
  '<|open|>argument key="city" type="string"<|sep|>Paris "Île"<|close|>argument<|sep|>' +
  '<|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>' +
  '<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>';
const TRUNCATED_TURN =
  '<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>' +
  '<|open|>argument key="days" type="number"<|sep|>three<|close|>argument<|sep|><|close|>call<|sep|>' +
  '<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>';

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather for a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 } },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
};

let good, bad, client, badClient;
before(async () => {
  good = await startDaemon('fake', ['--xtml', CALL_TURN]);
  bad = await startDaemon('fake', ['--xtml', TRUNCATED_TURN]);
  client = new OpenAI({ baseURL: good.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  badClient = new OpenAI({ baseURL: bad.url + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  assert.equal(await good.stop(), 0);
  assert.equal(await bad.stop(), 0);
});

const ask = [{ role: 'user', content: 'Weather in Paris for 3 days?' }];

test('a call comes back parsed, with finish_reason tool_calls and arguments valid for the schema', async () => {
  const r = await client.chat.completions.create({ model: 'fake', messages: ask, tools: [weather], temperature: 0 });
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, 'Let me check.');
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.match(call.id, /^call_/);
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments);
  assert.deepEqual(args, { city: 'Paris "Île"', days: 3 });
  const validate = new Ajv().compile(weather.function.parameters);
  assert.ok(validate(args), JSON.stringify(validate.errors));
});

test('streamed deltas assemble (SDK helper) into the same calls as the whole response', async () => {
  const req = { model: 'fake', messages: ask, tools: [weather], temperature: 0, seed: 5 };
  const whole = await client.chat.completions.create(req);
  const chunks = [];
  const stream = client.chat.completions.stream(req);
  stream.on('chunk', (c) => chunks.push(c));
  const final = await stream.finalChatCompletion();
  const strip = (calls) => calls.map((c) => ({ type: c.type, name: c.function.name, arguments: c.function.arguments }));
  assert.deepEqual(strip(final.choices[0].message.tool_calls), strip(whole.choices[0].message.tool_calls));
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.equal(final.choices[0].message.content, 'Let me check.');
  // OpenAI's layout: the first delta of a call has index, id, type and name with empty
  // arguments; later deltas only index and a piece of the arguments; never tag text.
  const toolDeltas = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
  assert.ok(toolDeltas.length >= 3, `expected the arguments in pieces, got ${toolDeltas.length} deltas`);
  assert.deepEqual(Object.keys(toolDeltas[0]).sort(), ['function', 'id', 'index', 'type']);
  assert.equal(toolDeltas[0].function.arguments, '');
  for (const d of toolDeltas.slice(1)) {
    assert.equal(d.id, undefined);
    assert.equal(d.index, 0);
  }
  for (const c of chunks) assert.ok(!JSON.stringify(c).includes('<|'), JSON.stringify(c));
});

test('agent loop: the reply goes back as history with a tool result; the prompt is reused', async () => {
  const messages = [...ask];
  const first = await client.chat.completions.create({ model: 'fake', messages, tools: [weather], temperature: 0 });
  const reply = first.choices[0].message;  // carries refusal: null, tool_calls, ...
  messages.push({ ...reply, annotations: [], audio: null, function_call: null });
  for (const call of reply.tool_calls)
    messages.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temp_c: 21 }) });
  const second = await client.chat.completions.create({ model: 'fake', messages, tools: [weather], temperature: 0 });
  assert.equal(second.choices[0].finish_reason, 'tool_calls');
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens,
    `${second.usage.prompt_tokens_details.cached_tokens} < ${first.usage.prompt_tokens}`);
  // A tool message that answers no call is refused.
  await assert.rejects(
    client.chat.completions.create({ model: 'fake', messages: [...messages, { role: 'tool', tool_call_id: 'call_nope', content: 'x' }] }),
    (e) => e instanceof OpenAI.BadRequestError && /call_nope/.test(e.message));
});

test('tool_choice none and no tools: the channel is not parsed into calls', async () => {
  const none = await client.chat.completions.create({ model: 'fake', messages: ask, tools: [weather], tool_choice: 'none', temperature: 0 });
  assert.equal(none.choices[0].message.tool_calls, undefined);
  assert.equal(none.choices[0].finish_reason, 'stop');
  const plain = await client.chat.completions.create({ model: 'fake', messages: ask, temperature: 0 });
  assert.equal(plain.choices[0].message.content, 'Let me check.');
});

test('legacy functions/function_call map onto tools', async () => {
  const r = await client.chat.completions.create({
    model: 'fake', messages: ask, functions: [weather.function], function_call: 'auto', temperature: 0,
  });
  assert.equal(r.choices[0].message.tool_calls[0].function.name, 'get_weather');
});

test('a malformed call degrades to content, never a 500, and is counted', async () => {
  const r = await badClient.chat.completions.create({ model: 'fake', messages: ask, tools: [weather], temperature: 0 });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.match(r.choices[0].message.content, /argument key="days" type="number"<\|sep\|>three/);
  const metrics = await (await fetch(bad.url + '/metrics')).text();
  assert.match(metrics, /k3serve:tool_call_parse_failures_total 1\b/);
});

test('history as the SDKs send it back: empty fields accepted, unknown ones still refused; efforts', async () => {
  const plain = await client.chat.completions.create({ model: 'fake', messages: ask, temperature: 0 });
  const reply = plain.choices[0].message;
  const history = [...ask,
    { ...reply, parsed: null, annotations: [], audio: null, function_call: null, tool_calls: [] },
    { role: 'assistant', content: null, refusal: 'I cannot help with that.', tool_calls: null },
    { role: 'user', content: 'And tomorrow?' }];
  const again = await client.chat.completions.create({ model: 'fake', messages: history, temperature: 0 });
  assert.equal(again.choices[0].message.role, 'assistant');
  // Unknown fields are ignored (the tolerance policy), at every level.
  const tolerant = await client.chat.completions.create({ model: 'fake', max_tokens: 2,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'x', annotations: [] }], refusal: null, colour: 'red' }] });
  assert.equal(tolerant.choices[0].message.role, 'assistant');
  // reasoning_effort: OpenAI's default "medium" thinks at high, "minimal" a little (low);
  // it does not turn thinking off. Both answer with a reasoning_content field (thinking on).
  for (const effort of ['medium', 'minimal']) {
    const r = await client.chat.completions.create({ model: 'fake', messages: ask, reasoning_effort: effort, temperature: 0 });
    assert.equal(typeof r.choices[0].message.reasoning_content, 'string', effort);
  }
  const off = await client.chat.completions.create({ model: 'fake', messages: ask, reasoning_effort: 'none', temperature: 0 });
  assert.equal(off.choices[0].message.reasoning_content, undefined);
});
