// POST /v1/responses through the official `openai` SDK (client.responses.create and its
// streaming helper) against the real HTTP layer and worker over the FakeEngine: text output,
// the event stream assembling into the same response, function tools and calls, an agent loop
// with function_call_output items reusing the cached prompt, reasoning items as history, and
// 400s for what the server cannot honour.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startDaemon } from './daemon.mjs';

const CALL_TURN =
  'Checking.<|close|>response<|sep|><|open|>tools<|sep|>' +
  '<|open|>call tool="get_weather" index="1"<|sep|>' +
  '<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>' +
  '<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>';
const weather = {
  type: 'function', name: 'get_weather', description: 'Weather for a city', strict: true,
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
};

let text, tools, textClient, toolClient;
before(async () => {
  text = await startDaemon('fake');
  tools = await startDaemon('fake', ['--xtml', CALL_TURN]);
  textClient = new OpenAI({ baseURL: text.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  toolClient = new OpenAI({ baseURL: tools.url + '/v1', apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  assert.equal(await text.stop(), 0);
  assert.equal(await tools.stop(), 0);
});

// Most cases here turn thinking off (reasoning.effort "none"): they are about the message and call
// items. A request that says nothing thinks first (docs/api.md "Thinking"), as the first case shows.
const OFF = { reasoning: { effort: 'none' } };

test('text in, a message item out; usage in the Responses layout', async () => {
  const r = await textClient.responses.create({ model: 'fake', input: 'Say hello', instructions: 'Be kind.', temperature: 0, ...OFF });
  assert.equal(r.object, 'response');
  assert.equal(r.status, 'completed');
  assert.match(r.id, /^resp_/);
  assert.equal(r.output.length, 1);
  assert.equal(r.output[0].type, 'message');
  assert.equal(r.output[0].role, 'assistant');
  assert.equal(r.output[0].content[0].type, 'output_text');
  assert.equal(r.output_text, 'Hello from the fake engine!');  // the SDK's convenience field
  assert.equal(r.instructions, 'Be kind.');
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  const short = await textClient.responses.create({ model: 'fake', input: 'Say hello', max_output_tokens: 3, temperature: 0, ...OFF });
  assert.equal(short.status, 'incomplete');
  assert.equal(short.incomplete_details.reason, 'max_output_tokens');
  // Saying nothing of thinking: the fake reasons first, as K3 does, and the answer follows.
  const thought = await textClient.responses.create({ model: 'fake', input: 'Say hello', temperature: 0 });
  assert.deepEqual(thought.output.map((o) => o.type), ['reasoning', 'message']);
  assert.deepEqual(thought.output[0].content, [{ type: 'reasoning_text', text: 'Let me think.' }]);
  assert.equal(thought.output_text, 'Hello from the fake engine!');
  assert.ok(thought.usage.output_tokens_details.reasoning_tokens > 0);
});

test('the event stream assembles into the same response', async () => {
  const req = { model: 'fake', input: [{ role: 'user', content: 'Say hello' }], temperature: 0, ...OFF };
  const whole = await textClient.responses.create(req);
  const types = [];
  const stream = textClient.responses.stream(req);
  stream.on('event', (e) => types.push(e.type));
  const final = await stream.finalResponse();
  assert.equal(final.output_text, whole.output_text);
  assert.deepEqual(types.slice(0, 4),
    ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
  assert.ok(types.includes('response.output_text.delta'));
  assert.deepEqual(types.slice(-4),
    ['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
  // Thinking on (the request says nothing of it): the reasoning item streams too, its part
  // announced before its deltas, and the SDK assembles the same items as the whole answer.
  const thinking = { model: 'fake', input: 'Say hello', temperature: 0 };
  const thoughtWhole = await textClient.responses.create(thinking);
  const thoughtTypes = [];
  const thoughtStream = textClient.responses.stream(thinking);
  thoughtStream.on('event', (e) => thoughtTypes.push(e.type));
  const thoughtStreamed = await thoughtStream.finalResponse();
  assert.deepEqual(thoughtTypes.slice(2, 5),
    ['response.output_item.added', 'response.content_part.added', 'response.reasoning_text.delta']);
  const texts = (r) => r.output.map((o) => [o.type, o.content.map((c) => [c.type, c.text])]);
  assert.deepEqual(texts(thoughtStreamed), texts(thoughtWhole));
  assert.equal(thoughtStreamed.output[0].content[0].text, 'Let me think.');
});

test('function tools: a function_call item, streamed and whole alike', async () => {
  const req = { model: 'fake', input: 'Weather in Paris?', tools: [weather], temperature: 0, ...OFF };
  const whole = await toolClient.responses.create(req);
  const calls = whole.output.filter((o) => o.type === 'function_call');
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, 'get_weather');
  assert.deepEqual(JSON.parse(calls[0].arguments), { city: 'Paris' });
  assert.match(calls[0].call_id, /^call_/);
  assert.equal(whole.output[0].type, 'message');
  assert.equal(whole.output_text, 'Checking.');
  const final = await toolClient.responses.stream(req).finalResponse();
  const streamed = final.output.filter((o) => o.type === 'function_call');
  assert.deepEqual(streamed.map((c) => [c.name, c.arguments]), calls.map((c) => [c.name, c.arguments]));
});

test('agent loop: function_call_output items answer the call; the prompt is reused', async () => {
  const input = [{ role: 'user', content: 'Weather in Paris?' }];
  const first = await toolClient.responses.create({ model: 'fake', input, tools: [weather], temperature: 0, ...OFF });
  input.push(...first.output);  // the message and the function_call, as the SDK returns them
  for (const call of first.output.filter((o) => o.type === 'function_call'))
    input.push({ type: 'function_call_output', call_id: call.call_id, output: '{"temp_c":21}' });
  const second = await toolClient.responses.create({ model: 'fake', input, tools: [weather], temperature: 0, ...OFF });
  assert.equal(second.status, 'completed');
  assert.ok(second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens);
  // A reasoning item is history for the assistant turn after it.
  const withReasoning = await textClient.responses.create({
    model: 'fake', reasoning: { effort: 'medium' }, temperature: 0,
    input: [{ role: 'user', content: 'hi' },
      { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 'Greet back.' }] },
      { role: 'assistant', content: [{ type: 'output_text', text: 'Hello!' }] },
      { role: 'user', content: [{ type: 'input_text', text: 'Again?' }] }],
  });
  assert.equal(withReasoning.status, 'completed');
  assert.equal(withReasoning.reasoning.effort, 'medium');
  // Thinking on: the fake reasons first, so the answer is a reasoning item with its text as
  // reasoning_text content, then the message.
  assert.equal(withReasoning.output[0].type, 'reasoning');
  assert.deepEqual(withReasoning.output[0].content, [{ type: 'reasoning_text', text: 'Let me think.' }]);
  assert.equal(withReasoning.output_text, 'Hello from the fake engine!');
  assert.equal(withReasoning.usage.output_tokens_details.reasoning_tokens > 0, true);
});

test('what the server cannot honour is a 400 naming it', async () => {
  const bad = async (extra, re) => assert.rejects(
    textClient.responses.create({ model: 'fake', input: 'x', ...extra }),
    (e) => e instanceof OpenAI.BadRequestError && re.test(e.message), JSON.stringify(extra));
  await bad({ previous_response_id: 'resp_123' }, /previous_response_id/);
  await bad({ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }, /image/);
  await bad({ background: true }, /background/);
});

test('a hosted tool is left out of the prompt and named in a header; an unknown field is ignored', async () => {
  // docs/api.md, the tolerance policy: what we cannot run is said, what we do not know is skipped.
  const hosted = await textClient.responses.create({ model: 'fake', input: 'x', tools: [{ type: 'web_search' }] })
    .withResponse();
  assert.match(hosted.response.headers.get('x-k3-ignored-tools') ?? '', /web_search/);
  assert.equal(hosted.data.status, 'completed');
  const unknown = await textClient.responses.create({ model: 'fake', input: 'x', frobnicate: 1 });
  assert.equal(unknown.status, 'completed');
});
