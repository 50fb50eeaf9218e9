// Every route's answers, whole and streamed, against OpenAI's published OpenAPI description
// (../shared/data/openai-openapi.json, components.schemas), on the stock daemon and the tiny
// random-weight model, through the openai SDK with openapi.mjs's validating fetch: chat (text,
// a required tool call, both streamed too), completions, responses (whole and streamed, with a
// function tool, with and without `strict`, and a user), models, and errors (a 400, a 404 for an
// unknown route). And the C++ tests' table of Responses stream event types
// (tests/server/responses/responses_event_types.h) against the description's. Without the description (a
// clone without ../shared beside it) every test skips, naming the file.
import { test as nodeTest, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startDaemon } from './daemon.mjs';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { validatingFetch, checked, specMissing, memberTypes } from './openapi.mjs';

const skip = specMissing();
const test = (name, fn) => nodeTest(name, { skip }, fn);

let daemon, client;
before(async () => {
  if (skip) return;
  daemon = await startDaemon('tiny');
  client = new OpenAI({ baseURL: daemon.url + '/v1', apiKey: 'unused', maxRetries: 0, fetch: validatingFetch() });
});
after(async () => { if (daemon) assert.equal(await daemon.stop(), 0); });

const messages = [{ role: 'user', content: 'Weather in Paris?' }];
const chatTools = [{ type: 'function', function: { name: 'get_weather', strict: true,
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false } } }];
const drain = async (stream) => { for await (const _ of stream); };

test('chat completions: text and a required call, whole and streamed', async () => {
  const start = { ...checked };
  await client.chat.completions.create({ model: 'gpt-5', messages, max_tokens: 8, user: 'u1' });
  await drain(await client.chat.completions.create({ model: 'gpt-5', messages, max_tokens: 8, stream: true,
    stream_options: { include_usage: true } }));
  await client.chat.completions.create({ model: 'gpt-5', messages, max_tokens: 200, tools: chatTools, tool_choice: 'required' });
  await drain(await client.chat.completions.create({ model: 'gpt-5', messages, max_tokens: 200, tools: chatTools,
    tool_choice: 'required', stream: true }));
  assert.equal(checked.answers - start.answers, 2);
  assert.ok(checked.events - start.events >= 4);
});

test('completions, models and errors', async () => {
  const start = checked.answers;
  await client.completions.create({ model: 'k3', prompt: 'Hello', max_tokens: 8 });
  await client.models.list();
  await assert.rejects(client.chat.completions.create({ model: 'k3', messages: [], max_tokens: 8 }), /must not be empty/);
  // A 404's error.code is a string or null (Error.code), never the status number.
  await assert.rejects(client.get('/no-such-route'), (e) => e instanceof OpenAI.NotFoundError);
  assert.equal(checked.answers - start, 4);
});

test('responses: whole and streamed, with a function tool and a user', async () => {
  const start = { ...checked };
  const tools = [{ type: 'function', name: 'get_weather', strict: true, parameters: chatTools[0].function.parameters }];
  await client.responses.create({ model: 'gpt-5', input: 'Hi', max_output_tokens: 16 });
  await client.responses.create({ model: 'gpt-5', input: 'Hi', max_output_tokens: 200, tools, tool_choice: 'required', user: 'u1' });
  await drain(await client.responses.create({ model: 'gpt-5', input: 'Hi', max_output_tokens: 16, stream: true }));
  await drain(await client.responses.create({ model: 'gpt-5', input: 'Hi', max_output_tokens: 200, tools,
    tool_choice: 'required', stream: true }));
  assert.equal(checked.answers - start.answers, 2);
  assert.ok(checked.events - start.events >= 6);
});

test('responses: a function tool sent without strict is echoed as Response.tools requires, whole and streamed', async () => {
  const start = { ...checked };
  const tools = [{ type: 'function', name: 'get_weather', parameters: chatTools[0].function.parameters }];
  const whole = await client.responses.create({ model: 'gpt-5', input: 'Hi', max_output_tokens: 200, tools, tool_choice: 'required' });
  assert.equal(whole.tools[0].strict, null);
  await drain(await client.responses.create({ model: 'gpt-5', input: 'Hi', max_output_tokens: 200, tools,
    tool_choice: 'required', stream: true }));
  assert.equal(checked.answers - start.answers, 1);
  assert.ok(checked.events - start.events >= 4);
});

test("the C++ tests' table of Responses stream event types is the description's", () => {
  const header = readFileSync(path.join(process.env.K3_SOURCE_DIR ?? '.', 'tests', 'server', 'responses', 'responses_event_types.h'), 'utf8');
  const body = header.slice(header.indexOf('kResponsesStreamEventTypes[] = {'), header.indexOf('};'));
  const table = [...body.matchAll(/"([^"]+)"/g)].map((m) => m[1]);
  assert.deepEqual(table, memberTypes('ResponseStreamEvent'));
});
