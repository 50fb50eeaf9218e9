// The OpenAI Agents SDK (@openai/agents) against the stock daemon on the tiny random-weight
// model, through its chat-completions model: an agent with a
// tool runs a turn (tool_choice "required" on its first model call, which the SDK resets after a
// tool use, so the call goes out, its result comes back and the turn ends), then runs again from
// the history the first run returned: that history carries the SDK's own output items
// (annotations, refusal, status, ids), which the daemon must take back. Each answer validates
// against ../shared/data/openai-openapi.json (openapi.mjs); without that file (a clone without
// ../shared beside it) the runs go unchecked and the test of their schemas skips, naming it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { z } from 'zod';
import {
  Agent, run, tool, user, setTracingDisabled, OpenAIChatCompletionsModel,
} from '@openai/agents';
import { startDaemon } from './daemon.mjs';
import { validatingFetch, checked, specMissing } from './openapi.mjs';

setTracingDisabled(true);

let daemon;
before(async () => { daemon = await startDaemon('tiny'); });
after(async () => { assert.equal(await daemon.stop(), 0); });

// The Responses model is left out: the SDK throws on a response.incomplete, which is what a
// random-weight model's text that runs into max_output_tokens is (as it would be from OpenAI).
for (const [api, makeModel] of [
  ['chat completions', (client) => new OpenAIChatCompletionsModel(client, 'gpt-5')],
]) {
  test(`agents SDK (${api}): a tool round trip, then a second run from the first run's history`, async () => {
    // Every answer the SDK is given is checked against OpenAI's published schemas on the way
    // (when the description is there: the next test reports it).
    const client = new OpenAI({ baseURL: daemon.url + '/v1', apiKey: 'unused', maxRetries: 0,
      fetch: specMissing() ? fetch : validatingFetch() });
    const seen = [];
    const weather = tool({
      name: 'get_weather',
      description: 'Weather for a city',
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => { seen.push(city); return `21 C in ${city}`; },
    });
    const agent = new Agent({
      name: 'weather', instructions: 'Answer briefly.', model: makeModel(client), tools: [weather],
      modelSettings: { toolChoice: 'required', maxTokens: 160, temperature: 0 },
    });
    const first = await run(agent, 'Weather in Paris?', { maxTurns: 4 });
    assert.ok(seen.length >= 1, `the tool ran: ${JSON.stringify(first.history)}`);
    assert.equal(typeof seen[0], 'string');
    const items = first.history.map((i) => i.type);
    assert.ok(items.includes('function_call'), items.join(','));
    assert.ok(items.includes('function_call_result'), items.join(','));
    assert.equal(typeof first.finalOutput, 'string');

    const second = await run(agent, [...first.history, user('And tomorrow?')], { maxTurns: 4 });
    assert.equal(typeof second.finalOutput, 'string');
    assert.ok(second.history.length > first.history.length);
    assert.ok(second.rawResponses.length >= 1);
  });
}

test("agents SDK: every answer of the runs above conforms to OpenAI's published schemas", { skip: specMissing() }, () => {
  // The validating fetch threw (failing the run) on any answer or event that does not conform.
  assert.ok(checked.answers + checked.events >= 4, JSON.stringify(checked));
});
