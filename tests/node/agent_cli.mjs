// The three coding agents' CLIs (pinned in tests/node/package.json), run as their users run them
// against a daemon, each in its own scratch home and working directory with read-only tools
// (the model picks the tool and writes its arguments): Claude Code (`claude -p`, the Messages
// API), Codex (`codex exec`, the Responses API) and opencode (`opencode run`, chat completions
// through the AI SDK). Each run* resolves once the CLI exits, having asserted that it completed a
// turn with a tool round trip (docs/agents.md, "Agents on a random-weight model"). Used by
// agent_clis.test.mjs and agent_long_prefill.test.mjs.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { scratchDir } from './daemon.mjs';

const bin = (name) => path.join(import.meta.dirname, 'node_modules', '.bin', name);

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

export const jsonLines = (text) => text.split('\n').filter((l) => l.startsWith('{')).map((l) => {
  try { return JSON.parse(l); } catch { return null; }
}).filter(Boolean);

function explain(r, daemon) {
  return `exit ${r.code}\nstdout:\n${r.stdout.slice(-4000)}\nstderr:\n${r.stderr.slice(-4000)}\ndaemon:\n${daemon.log().slice(-3000)}`;
}

const prompt = 'Read notes.txt and say what it holds.';
function workDir(name) {
  const work = scratchDir(name);
  writeFileSync(path.join(work, 'notes.txt'), 'k3serve test file\n');
  return work;
}

// Resolves with {r, result}: the CLI's run and its `result` event.
export async function runClaude(daemon, label) {
  const home = scratchDir(`claude-home-${label}`);
  const work = workDir(`claude-work-${label}`);
  const r = await runCli(bin('claude'), ['-p', prompt, '--output-format', 'stream-json',
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
  assert.equal(r.code, 0, explain(r, daemon));
  assert.ok(uses.length >= 1, `no tool_use: ${explain(r, daemon)}`);
  assert.ok(['Read', 'Glob', 'Grep'].includes(uses[0].name));
  assert.ok(results.some((b) => b.tool_use_id === uses[0].id), `no tool_result for ${uses[0].id}`);
  assert.equal(result?.subtype, 'success', explain(r, daemon));
  return { r, result };
}

// Retries off: a stream Codex drops fails the run instead of starting over.
export async function runCodex(daemon, label) {
  const home = scratchDir(`codex-home-${label}`);
  const work = workDir(`codex-work-${label}`);
  writeFileSync(path.join(home, 'config.toml'), [
    'model = "k3"', 'model_provider = "k3serve"', 'approval_policy = "never"', 'sandbox_mode = "read-only"',
    '[model_providers.k3serve]', 'name = "k3serve"', `base_url = "${daemon.url}/v1"`, 'env_key = "K3_KEY"',
    'wire_api = "responses"', 'request_max_retries = 0', 'stream_max_retries = 0', '',
  ].join('\n'));
  const r = await runCli(bin('codex'), ['exec', '--skip-git-repo-check', '--json', prompt], {
    cwd: work, env: { HOME: home, CODEX_HOME: home, K3_KEY: 'unused' },
  });
  const events = jsonLines(r.stdout);
  assert.equal(r.code, 0, explain(r, daemon));
  assert.ok(events.some((e) => e.type === 'turn.completed'), explain(r, daemon));
  // The model picks any of Codex's tools, some of which print no item in --json (view_image,
  // request_user_input): Codex's own record of the session has every call and the output it
  // sent back.
  const items = readdirSync(path.join(home, 'sessions'), { recursive: true })
    .filter((f) => f.endsWith('.jsonl'))
    .flatMap((f) => jsonLines(readFileSync(path.join(home, 'sessions', f), 'utf8')))
    .filter((e) => e.type === 'response_item').map((e) => e.payload);
  const calls = items.filter((i) => i.type === 'function_call' || i.type === 'custom_tool_call');
  assert.ok(calls.length >= 1, `no tool call: ${explain(r, daemon)}`);
  assert.ok(items.some((i) => i.type.endsWith('_output') && i.call_id === calls[0].call_id),
    `no output sent back for ${calls[0].call_id}: ${JSON.stringify(items).slice(-3000)}`);
  return { r };
}

export async function runOpencode(daemon, label) {
  const root = scratchDir(`opencode-${label}`);
  const work = workDir(`opencode-work-${label}`);
  writeFileSync(path.join(work, 'opencode.json'), JSON.stringify({
    $schema: 'https://opencode.ai/config.json',
    provider: { k3serve: { npm: '@ai-sdk/openai-compatible', name: 'k3serve',
      options: { baseURL: `${daemon.url}/v1`, apiKey: 'unused' }, models: { k3: { name: 'K3' } } } },
    model: 'k3serve/k3', autoupdate: false, share: 'disabled',
    // Read-only tools: the model chooses what to call.
    tools: { bash: false, edit: false, write: false, patch: false, webfetch: false, task: false, todowrite: false },
  }));
  const xdg = (d) => path.join(root, d);
  const r = await runCli(bin('opencode'), ['run', '--format', 'json', prompt], {
    cwd: work,
    env: {
      HOME: root, XDG_CONFIG_HOME: xdg('config'), XDG_DATA_HOME: xdg('data'), XDG_CACHE_HOME: xdg('cache'),
      XDG_STATE_HOME: xdg('state'), OPENCODE_DISABLE_MODELS_FETCH: '1', OPENCODE_DISABLE_AUTOUPDATE: '1',
      OPENCODE_DISABLE_LSP_DOWNLOAD: '1', OPENCODE_DISABLE_DEFAULT_PLUGINS: '1', OPENCODE_DISABLE_SHARE: '1',
    },
  });
  const events = jsonLines(r.stdout);
  assert.equal(r.code, 0, explain(r, daemon));
  const tools = events.filter((e) => e.type === 'tool_use');
  assert.ok(tools.length >= 1, `no tool use: ${explain(r, daemon)}`);
  // The tool ran (or failed on the model's arguments) and its result went into the next step.
  assert.ok(['completed', 'error'].includes(tools[0].part?.state?.status), JSON.stringify(tools[0]));
  assert.ok(events.some((e) => e.type === 'step_start' && e.timestamp > tools[0].timestamp), explain(r, daemon));
  return { r };
}
