// The three coding agents, as their users run them, against the stock daemon on the agent
// preset (make-model --preset agent: 64k positions, since their first prompts are 12k-41k
// tokens, and weights whose answers end: docs/model.md, "Synthetic models"), with no proxy:
// Claude Code (`claude -p`, the Messages API), Codex (`codex exec`, the Responses API) and
// opencode (`opencode run`, chat completions) each complete a turn with a tool round trip. A
// random-weight model under tool_choice auto rarely calls a tool, so the daemon runs with
// --new-turn-tool-choice required (docs/agents.md): a turn's first request must call one of the
// offered tools (the grammar keeps the call valid for its schema), the request carrying the
// result is left to the model, and so each agent runs the tool and sends its result back before
// the turn ends. The agents are given read-only tools in a scratch directory, since the model
// picks the tool and writes its arguments.
//
// The prompt cache's disk tier is on: the daemon is restarted between two Claude Code turns of
// the same conversation-less prompt, and the second finds the first's system prompt on disk.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, scratchDir } from './daemon.mjs';
import { runClaude, runCodex, runOpencode } from './agent_cli.mjs';

const cacheDir = scratchDir('prompt-cache');
const daemonArgs = ['--new-turn-tool-choice', 'required', '--prompt-cache-dir', cacheDir, '--log-level', 'info'];
const figures = [];

let daemon;
before(async () => { daemon = await startDaemon('agent', daemonArgs); });
after(async () => {
  assert.equal(await daemon.stop(), 0);
  for (const f of figures) console.log(`# ${f}`);
});

// What the agents rely on, checked first and in a second: the preset's free-text answers end
// by themselves (a random-weight model's otherwise never do), and a grammar-held call closes
// with arguments valid for its schema, a JSON array of strings included.
test('the agent preset: free-text answers end within a few tokens; a required call closes', async () => {
  const post = async (body) => {
    const res = await fetch(`${daemon.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'k3', ...body }),
    });
    assert.equal(res.status, 200);
    return res.json();
  };
  for (let seed = 1; seed <= 8; seed++) {
    const j = await post({ seed, temperature: 1, max_tokens: 64, messages: [{ role: 'user', content: `Say something ${seed}.` }] });
    assert.equal(j.choices[0].finish_reason, 'stop', JSON.stringify(j));
    assert.ok(j.usage.completion_tokens < 64);
  }
  const shell = { type: 'function', function: { name: 'shell', parameters: { type: 'object', required: ['command'],
    properties: { command: { type: 'array', items: { type: 'string' } }, workdir: { type: 'string' } } } } };
  for (let seed = 1; seed <= 4; seed++) {
    const j = await post({ seed, temperature: 1, max_tokens: 2000, tools: [shell], tool_choice: 'required',
      messages: [{ role: 'user', content: 'List the files.' }] });
    assert.equal(j.choices[0].finish_reason, 'tool_calls', JSON.stringify(j));
    const args = JSON.parse(j.choices[0].message.tool_calls[0].function.arguments);
    assert.ok(Array.isArray(args.command) && args.command.every((c) => typeof c === 'string'), JSON.stringify(args));
  }
});

test('Claude Code: claude -p completes a turn with a tool round trip; a restarted daemon finds the system prompt on disk', async () => {
  const first = await runClaude(daemon, '1');
  figures.push(`Claude Code first turn (cold): ${first.r.seconds.toFixed(1)} s, ${first.result.num_turns} model calls`);
  // A new daemon on the same prompt-cache directory: the second run's first request starts
  // from the state the first left on disk.
  assert.equal(await daemon.stop(), 0);
  daemon = await startDaemon('agent', daemonArgs);
  const second = await runClaude(daemon, '2');
  figures.push(`Claude Code after a restart (disk tier): ${second.r.seconds.toFixed(1)} s`);
  const usage = second.result.usage;
  assert.ok(usage.cache_read_input_tokens > 1000, JSON.stringify(usage));
});

test('Codex: codex exec completes a turn with a tool round trip (Responses API)', async () => {
  const { r } = await runCodex(daemon, 'turn');
  figures.push(`Codex turn: ${r.seconds.toFixed(1)} s`);
});

test('opencode: opencode run completes a turn with a tool round trip (chat completions)', async () => {
  const { r } = await runOpencode(daemon, 'turn');
  figures.push(`opencode turn: ${r.seconds.toFixed(1)} s`);
});
