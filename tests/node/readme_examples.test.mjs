// Runs the README's daemon examples (the `sh` and `js` blocks of "## Quick start") against a
// daemon, so the documented commands keep working: curl for chat, streaming completions, health
// and metrics, and the openai SDK snippet. The fake daemon serves under the README's model id.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDaemon } from './daemon.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const readme = readFileSync(path.join(process.env.K3_SOURCE_DIR ?? path.join(here, '../..'), 'README.md'), 'utf8');
const start = readme.indexOf('## Quick start');
const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
const blocks = (lang) => [...section.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]);

let daemon;
before(async () => { daemon = await startDaemon('fake', ['--alias', 'demo']); });
after(async () => { assert.equal(await daemon.stop(), 0); });

const withUrl = (code) => code.replaceAll('http://127.0.0.1:8080', daemon.url);

test('the README has the examples', () => {
  assert.equal(blocks('sh').length, 3);
  assert.equal(blocks('js').length, 1);
});

test('curl: chat completion', () => {
  const out = execFileSync('bash', ['-euo', 'pipefail', '-c', withUrl(blocks('sh')[0])], { encoding: 'utf8' });
  const j = JSON.parse(out);
  assert.equal(j.model, 'demo');
  assert.equal(j.choices[0].message.content.length > 0, true);
});

test('curl: streamed completion with usage', () => {
  const out = execFileSync('bash', ['-euo', 'pipefail', '-c', withUrl(blocks('sh')[1])], { encoding: 'utf8' });
  const events = out.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
  assert.equal(events.at(-1), '[DONE]');
  const usage = JSON.parse(events.at(-2));
  assert.deepEqual(usage.choices, []);
  assert.equal(usage.usage.completion_tokens, 16);
});

test('curl: health and metrics', () => {
  const out = execFileSync('bash', ['-euo', 'pipefail', '-c', withUrl(blocks('sh')[2])], { encoding: 'utf8' });
  assert.match(out, /\{"status":"ok"\}k3serve:queue_depth 0/);
});

test('openai SDK snippet', () => {
  const file = path.join(here, `.readme_example_${process.pid}.mjs`);
  writeFileSync(file, withUrl(blocks('js')[0]));
  try {
    const out = execFileSync(process.execPath, [file], { encoding: 'utf8' });
    assert.equal(out, "Hello from the f\nHello from the f");  // 16 tokens of the scripted answer, twice
  } finally {
    rmSync(file, { force: true });
  }
});
