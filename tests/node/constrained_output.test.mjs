// Constrained output through the official `openai` SDK against the real daemon on the tiny
// synthetic model. Its weights are random, so nothing but the grammar makes the output valid:
// every answer below must parse and validate (zod through the SDK's parse helper, ajv for raw
// JSON schemas), across seeds, streamed and not, in chat and completions.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import Ajv from 'ajv';
import { startDaemon } from './daemon.mjs';

let daemon, client, model;
const ajv = new Ajv({ strict: false });

before(async () => {
  daemon = await startDaemon('tiny');
  client = new OpenAI({ baseURL: daemon.url + '/v1', apiKey: 'unused', maxRetries: 0 });
  model = (await client.models.list()).data[0].id;
});
after(async () => { assert.equal(await daemon.stop(), 0); });

const messages = [{ role: 'user', content: 'Describe a pet as JSON.' }];

// Nested objects, arrays, enums, bounds, and optional fields (the SDK turns .optional() into
// required-but-nullable, as OpenAI's strict mode wants).
const Pet = z.object({
  name: z.string(),
  kind: z.enum(['cat', 'dog', 'bird']),
  age: z.number().int().min(0).max(40),
  tags: z.array(z.string()).max(3),
  owner: z.object({ name: z.string(), email: z.string().optional().nullable() }),
  visits: z.array(z.object({ year: z.number().int().min(2000).max(2030), ok: z.boolean() })),
  nickname: z.string().optional().nullable(),
  weight: z.number().nullable(),
});

test('zod schema through the SDK parse helper: greedy and sampled', async () => {
  for (const [temperature, seed] of [[0, 1], [1, 2], [1, 3]]) {
    const r = await client.chat.completions.parse({
      model, messages, max_tokens: 400, temperature, seed, response_format: zodResponseFormat(Pet, 'pet'),
    });
    const msg = r.choices[0].message;
    assert.ok(msg.parsed, `no parsed object: ${msg.content}`);
    assert.deepEqual(Pet.parse(JSON.parse(msg.content)), msg.parsed);
    // Properties come in the schema's order (as OpenAI writes them).
    assert.deepEqual(Object.keys(JSON.parse(msg.content)), Object.keys(Pet.shape));
    assert.equal(r.choices[0].finish_reason, 'stop');
  }
});

// A raw JSON schema with keywords the zod helper does not emit: optional properties left out
// of `required`, anyOf, $ref to $defs, a pattern, an exclusive bound.
const schema = {
  type: 'object',
  properties: {
    id: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{2}$' },
    status: { anyOf: [{ const: 'open' }, { type: 'integer', exclusiveMinimum: 0, maximum: 9 }] },
    items: { type: 'array', items: { $ref: '#/$defs/item' }, minItems: 1, maxItems: 2 },
    note: { type: 'string', maxLength: 10 },
  },
  required: ['id', 'status', 'items'],
  additionalProperties: false,
  $defs: { item: { type: 'object', properties: { sku: { type: 'string' }, qty: { type: 'number', minimum: 1 } },
    required: ['sku'], additionalProperties: false } },
};
const validate = ajv.compile(schema);

test('json_schema validates with ajv in chat and completions, across seeds', async () => {
  const response_format = { type: 'json_schema', json_schema: { name: 'order', schema, strict: true } };
  for (const seed of [5, 6, 7]) {
    const chat = await client.chat.completions.create({ model, messages, max_tokens: 300, temperature: 1, seed, response_format });
    const value = JSON.parse(chat.choices[0].message.content);
    assert.ok(validate(value), `${JSON.stringify(validate.errors)} in ${chat.choices[0].message.content}`);
    const cmpl = await client.completions.create({ model, prompt: 'Order:', max_tokens: 300, temperature: 1, seed, response_format });
    assert.ok(validate(JSON.parse(cmpl.choices[0].text)), cmpl.choices[0].text);
  }
});

test('json_object parses; streamed equals whole with the same seed', async () => {
  const req = { model, messages, max_tokens: 120, temperature: 0.9, seed: 11, response_format: { type: 'json_object' } };
  const whole = await client.chat.completions.create(req);
  const value = JSON.parse(whole.choices[0].message.content);
  assert.equal(typeof value, 'object');
  assert.ok(value !== null && !Array.isArray(value));
  const stream = await client.chat.completions.create({ ...req, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, whole.choices[0].message.content);
  const cmpl = await client.completions.create({ model, prompt: '{', max_tokens: 60, temperature: 0, response_format: { type: 'json_object' } });
  JSON.parse(cmpl.choices[0].text);
});

test('thinking on: reasoning first, then a response that validates', async () => {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 250, temperature: 0, reasoning_effort: 'high',
    response_format: { type: 'json_schema', json_schema: { name: 'order', schema } },
  });
  assert.ok(validate(JSON.parse(r.choices[0].message.content)), r.choices[0].message.content);
});

test('unsupported schema keywords are a 400 naming the keyword', async () => {
  const bad = { type: 'object', properties: { mail: { type: 'string', format: 'email' } } };
  await assert.rejects(
    client.chat.completions.create({ model, messages, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: bad } } }),
    (e) => e instanceof OpenAI.BadRequestError && /'format'/.test(e.message) && e.param === 'response_format.json_schema.schema');
  await assert.rejects(client.chat.completions.create({ model, messages, response_format: { type: 'yaml' } }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format.type');
  // The daemon is still serving.
  const ok = await client.chat.completions.create({ model, messages, max_tokens: 2 });
  assert.ok(ok.choices[0]);
});

// Four schema features tool definitions use (docs/api.md, "Schema keywords enforced"): a pattern
// with minLength/maxLength, maxLength above 1,000, fractional bounds on a number, and integer
// bounds beyond 2^53 (written into the body as text: a JavaScript number cannot hold
// 9007199254740993). As response_format and as a required tool's parameters; the answers must
// validate with ajv and, for the big integers, compared exactly as BigInt.
const featuresText = `{"type":"object","properties":{
  "handle":{"type":"string","pattern":"^[a-z0-9_]+$","minLength":3,"maxLength":12},
  "bio":{"type":"string","maxLength":1500},
  "score":{"type":"number","minimum":0.5,"exclusiveMaximum":9.75},
  "big":{"type":"integer","minimum":-9007199254740993,"maximum":9007199254740993},
  "huge":{"type":"integer","exclusiveMinimum":100000000000000000000}},
  "required":["handle","bio","score","big","huge"],"additionalProperties":false}`;
const validateFeatures = ajv.compile(JSON.parse(featuresText));

// The answer's JSON text: valid under ajv, and its integers within the bounds as written.
function checkFeatures(text) {
  const value = JSON.parse(text);
  assert.ok(validateFeatures(value), `${JSON.stringify(validateFeatures.errors)} in ${text}`);
  const big = BigInt(text.match(/"big":(-?\d+)/)[1]);
  assert.ok(big >= -9007199254740993n && big <= 9007199254740993n, text);
  assert.ok(BigInt(text.match(/"huge":(\d+)/)[1]) > 100000000000000000000n, text);
}

async function post(path, bodyText) {
  const res = await fetch(daemon.url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bodyText });
  const json = await res.json();
  assert.equal(res.status, 200, JSON.stringify(json));
  return json;
}

test('pattern with lengths, long maxLength, fractional and beyond-2^53 bounds: answers validate', async () => {
  for (const seed of [21, 22, 23]) {
    const format = await post('/v1/chat/completions', `{"model":"${model}","max_tokens":300,"temperature":1,"seed":${seed},
      "messages":[{"role":"user","content":"A profile, please."}],
      "response_format":{"type":"json_schema","json_schema":{"name":"profile","schema":${featuresText}}}}`);
    checkFeatures(format.choices[0].message.content);
    const call = await post('/v1/chat/completions', `{"model":"${model}","max_tokens":400,"temperature":1,"seed":${seed},
      "messages":[{"role":"user","content":"Save my profile."}],"tool_choice":"required",
      "tools":[{"type":"function","function":{"name":"save_profile","parameters":${featuresText}}}]}`);
    const calls = call.choices[0].message.tool_calls;
    assert.ok(calls?.length >= 1, JSON.stringify(call.choices[0]));
    for (const c of calls) checkFeatures(c.function.arguments);
  }
});
