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
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, scratchDir } from './daemon.mjs';

const bin = (name) => path.join(import.meta.dirname, 'node_modules', '.bin', name);
const cacheDir = scratchDir('prompt-cache');
const daemonArgs = ['--new-turn-tool-choice', 'required', '--prompt-cache-dir', cacheDir, '--log-level', 'info'];
const figures = [];

let daemon;
before(async () => { daemon = await startDaemon('agent', daemonArgs); });
after(async () => {
  assert.equal(await daemon.stop(), 0);
  for (const f of figures) console.log(`# ${f}`);
});

// Runs a CLI to its end; resolves with {code, stdout, stderr, seconds}. No timer of its own:
// ctest's timeout bounds the test.
function runCli(cmd, args, { env, cwd, input = '' }) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(cmd, args, { cwd, env: { PATH: process.env.PATH, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr, seconds: Number(process.hrtime.bigint() - started) / 1e9 }));
    child.stdin.end(input);
  });
}

const jsonLines = (text) => text.split('\n').filter((l) => l.startsWith('{')).map((l) => {
  try { return JSON.parse(l); } catch { return null; }
}).filter(Boolean);

function explain(r) { return `exit ${r.code}\nstdout:\n${r.stdout.slice(-4000)}\nstderr:\n${r.stderr.slice(-4000)}\ndaemon:\n${daemon.log().slice(-3000)}`; }

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

async function claudeTurn(label) {
  const home = scratchDir(`claude-home-${label}`);
  const work = scratchDir(`claude-work-${label}`);
  writeFileSync(path.join(work, 'notes.txt'), 'k3serve test file\n');
  const r = await runCli(bin('claude'), ['-p', 'Read notes.txt and say what it holds.', '--output-format', 'stream-json',
    '--verbose', '--tools', 'Read,Glob,Grep', '--max-turns', '4'], {
    cwd: work,
    env: {
      HOME: home, ANTHROPIC_BASE_URL: daemon.url, ANTHROPIC_API_KEY: 'unused',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1',
    },
  });
  const events = jsonLines(r.stdout);
  const blocks = (role) => events.filter((e) => e.type === role).flatMap((e) => e.message?.content ?? []);
  const uses = blocks('assistant').filter((b) => b.type === 'tool_use');
  const results = blocks('user').filter((b) => b.type === 'tool_result');
  const result = events.find((e) => e.type === 'result');
  assert.equal(r.code, 0, explain(r));
  assert.ok(uses.length >= 1, `no tool_use: ${explain(r)}`);
  assert.ok(['Read', 'Glob', 'Grep'].includes(uses[0].name));
  assert.ok(results.some((b) => b.tool_use_id === uses[0].id), `no tool_result for ${uses[0].id}`);
  assert.equal(result?.subtype, 'success', explain(r));
  return { r, result };
}

test('Claude Code: claude -p completes a turn with a tool round trip; a restarted daemon finds the system prompt on disk', async () => {
  const first = await claudeTurn('1');
  figures.push(`Claude Code first turn (cold): ${first.r.seconds.toFixed(1)} s, ${first.result.num_turns} model calls`);
  // A new daemon on the same prompt-cache directory: the second run's first request starts
  // from the state the first left on disk.
  assert.equal(await daemon.stop(), 0);
  daemon = await startDaemon('agent', daemonArgs);
  const second = await claudeTurn('2');
  figures.push(`Claude Code after a restart (disk tier): ${second.r.seconds.toFixed(1)} s`);
  const usage = second.result.usage;
  assert.ok(usage.cache_read_input_tokens > 1000, JSON.stringify(usage));
});

test('Codex: codex exec completes a turn with a tool round trip (Responses API)', async () => {
  const home = scratchDir('codex-home');
  const work = scratchDir('codex-work');
  writeFileSync(path.join(work, 'notes.txt'), 'k3serve test file\n');
  writeFileSync(path.join(home, 'config.toml'), [
    'model = "k3"', 'model_provider = "k3serve"', 'approval_policy = "never"', 'sandbox_mode = "read-only"',
    '[model_providers.k3serve]', 'name = "k3serve"', `base_url = "${daemon.url}/v1"`, 'env_key = "K3_KEY"',
    'wire_api = "responses"', 'request_max_retries = 0', 'stream_max_retries = 0', '',
  ].join('\n'));
  const r = await runCli(bin('codex'), ['exec', '--skip-git-repo-check', '--json', 'Read notes.txt and say what it holds.'], {
    cwd: work, env: { HOME: home, CODEX_HOME: home, K3_KEY: 'unused' },
  });
  figures.push(`Codex turn: ${r.seconds.toFixed(1)} s`);
  const events = jsonLines(r.stdout);
  assert.equal(r.code, 0, explain(r));
  assert.ok(events.some((e) => e.type === 'turn.completed'), explain(r));
  // The model picks any of Codex's tools, some of which print no item in --json (view_image,
  // request_user_input): Codex's own record of the session has every call and the output it
  // sent back.
  const items = readdirSync(path.join(home, 'sessions'), { recursive: true })
    .filter((f) => f.endsWith('.jsonl'))
    .flatMap((f) => jsonLines(readFileSync(path.join(home, 'sessions', f), 'utf8')))
    .filter((e) => e.type === 'response_item').map((e) => e.payload);
  const calls = items.filter((i) => i.type === 'function_call' || i.type === 'custom_tool_call');
  assert.ok(calls.length >= 1, `no tool call: ${explain(r)}`);
  assert.ok(items.some((i) => i.type.endsWith('_output') && i.call_id === calls[0].call_id),
    `no output sent back for ${calls[0].call_id}: ${JSON.stringify(items).slice(-3000)}`);
});

test('opencode: opencode run completes a turn with a tool round trip (chat completions)', async () => {
  const root = scratchDir('opencode');
  const work = scratchDir('opencode-work');
  writeFileSync(path.join(work, 'notes.txt'), 'k3serve test file\n');
  writeFileSync(path.join(work, 'opencode.json'), JSON.stringify({
    $schema: 'https://opencode.ai/config.json',
    provider: { k3serve: { npm: '@ai-sdk/openai-compatible', name: 'k3serve',
      options: { baseURL: `${daemon.url}/v1`, apiKey: 'unused' }, models: { k3: { name: 'K3' } } } },
    model: 'k3serve/k3', autoupdate: false, share: 'disabled',
    // Read-only tools: the model chooses what to call.
    tools: { bash: false, edit: false, write: false, patch: false, webfetch: false, task: false, todowrite: false },
  }));
  const xdg = (d) => path.join(root, d);
  const r = await runCli(bin('opencode'), ['run', '--format', 'json', 'Read notes.txt and say what it holds.'], {
    cwd: work,
    env: {
      HOME: root, XDG_CONFIG_HOME: xdg('config'), XDG_DATA_HOME: xdg('data'), XDG_CACHE_HOME: xdg('cache'),
      XDG_STATE_HOME: xdg('state'), OPENCODE_DISABLE_MODELS_FETCH: '1', OPENCODE_DISABLE_AUTOUPDATE: '1',
      OPENCODE_DISABLE_LSP_DOWNLOAD: '1', OPENCODE_DISABLE_DEFAULT_PLUGINS: '1', OPENCODE_DISABLE_SHARE: '1',
    },
  });
  figures.push(`opencode turn: ${r.seconds.toFixed(1)} s`);
  const events = jsonLines(r.stdout);
  assert.equal(r.code, 0, explain(r));
  const tools = events.filter((e) => e.type === 'tool_use');
  assert.ok(tools.length >= 1, `no tool use: ${explain(r)}`);
  // The tool ran (or failed on the model's arguments) and its result went into the next step.
  assert.ok(['completed', 'error'].includes(tools[0].part?.state?.status), JSON.stringify(tools[0]));
  assert.ok(events.some((e) => e.type === 'step_start' && e.timestamp > tools[0].timestamp), explain(r));
});
