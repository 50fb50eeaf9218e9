// What most applications use instead of the raw `openai` client, against the real HTTP layer
// and worker over the FakeEngine (scripted XTML output): the Vercel AI SDK through
// @ai-sdk/openai-compatible (chat completions) and @ai-sdk/openai (its default, the Responses
// API), and LangChain's ChatOpenAI (chat completions and useResponsesApi): text, streaming and
// tool calls with their arguments parsed by each library's own schema checks, and structured
// output (generateObject, withStructuredOutput) through response_format / text.format.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { generateObject, generateText, streamText, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';
import { startDaemon } from './daemon.mjs';

const CALL_TURN =
  'On it.<|close|>response<|sep|><|open|>tools<|sep|>' +
  '<|open|>call tool="get_weather" index="1"<|sep|>' +
  '<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>' +
  '<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>';
const ANSWER = 'Hello from the fake engine!';
// What the "JSON" daemon writes: an object valid for `citySchema` (the grammar lets it through).
const JSON_ANSWER = '{"city":"Paris","days":3}';
const citySchema = z.object({ city: z.string(), days: z.number().int() });

let text, tools, jsonOut;
before(async () => {
  text = await startDaemon('fake');
  tools = await startDaemon('fake', ['--xtml', CALL_TURN]);
  jsonOut = await startDaemon('fake', ['--answer', JSON_ANSWER]);
});
after(async () => {
  assert.equal(await text.stop(), 0);
  assert.equal(await tools.stop(), 0);
  assert.equal(await jsonOut.stop(), 0);
});

const weatherTool = () => tool({
  description: 'Weather for a city',
  inputSchema: z.object({ city: z.string() }),
});

for (const [name, makeModel] of [
  ['ai-sdk openai-compatible (chat completions)',
    (url) => createOpenAICompatible({ name: 'k3serve', baseURL: url + '/v1', apiKey: 'unused' }).chatModel('fake')],
  ['ai-sdk openai (Responses API)',
    (url) => createOpenAI({ baseURL: url + '/v1', apiKey: 'unused' })('fake')],
]) {
  test(`${name}: generateText, streamText, tool calls`, async () => {
    const r = await generateText({ model: makeModel(text.url), prompt: 'Say hello', temperature: 0, maxRetries: 0 });
    assert.equal(r.text, ANSWER);
    assert.ok(r.usage.inputTokens > 0 && r.usage.outputTokens > 0);
    const s = streamText({ model: makeModel(text.url), prompt: 'Say hello', temperature: 0, maxRetries: 0 });
    let streamed = '';
    for await (const piece of s.textStream) streamed += piece;
    assert.equal(streamed, ANSWER);
    const call = await generateText({
      model: makeModel(tools.url), prompt: 'Weather in Paris?', temperature: 0, maxRetries: 0,
      tools: { get_weather: weatherTool() },
    });
    assert.equal(call.finishReason, 'tool-calls');
    assert.equal(call.toolCalls.length, 1);
    assert.equal(call.toolCalls[0].toolName, 'get_weather');
    assert.deepEqual(call.toolCalls[0].input, { city: 'Paris' });
    const streamedCall = streamText({
      model: makeModel(tools.url), prompt: 'Weather in Paris?', temperature: 0, maxRetries: 0,
      tools: { get_weather: weatherTool() },
    });
    const calls = await streamedCall.toolCalls;
    assert.deepEqual(calls.map((c) => [c.toolName, c.input]), [['get_weather', { city: 'Paris' }]]);
    // generateObject: a JSON schema from zod, enforced by constrained output.
    const obj = await generateObject({ model: makeModel(jsonOut.url), schema: citySchema, prompt: 'A city', temperature: 0, maxRetries: 0 });
    assert.deepEqual(obj.object, { city: 'Paris', days: 3 });
  });
}

for (const useResponsesApi of [false, true]) {
  test(`langchain ChatOpenAI (useResponsesApi: ${useResponsesApi}): invoke, stream, bindTools`, async () => {
    const make = (url) => new ChatOpenAI({
      model: 'fake', apiKey: 'unused', temperature: 0, maxRetries: 0, useResponsesApi,
      configuration: { baseURL: url + '/v1' },
    });
    const reply = await make(text.url).invoke('Say hello');
    assert.equal(typeof reply.content === 'string' ? reply.content : reply.content.map((p) => p.text).join(''), ANSWER);
    let streamed = '';
    for await (const chunk of await make(text.url).stream('Say hello'))
      streamed += typeof chunk.content === 'string' ? chunk.content : chunk.content.map((p) => p.text ?? '').join('');
    assert.equal(streamed, ANSWER);
    const withTools = make(tools.url).bindTools([{
      type: 'function',
      function: { name: 'get_weather', description: 'Weather for a city',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
    }]);
    const called = await withTools.invoke('Weather in Paris?');
    assert.equal(called.tool_calls.length, 1);
    assert.equal(called.tool_calls[0].name, 'get_weather');
    assert.deepEqual(called.tool_calls[0].args, { city: 'Paris' });
    const structured = make(jsonOut.url).withStructuredOutput(citySchema, { method: 'jsonSchema' });
    assert.deepEqual(await structured.invoke('A city'), { city: 'Paris', days: 3 });
  });
}
