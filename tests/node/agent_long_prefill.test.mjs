// The coding agents through a prefill longer than their patience (docs/agents.md, "Prefills
// longer than a client's patience"). On the real model an agent's first prompt prefills for
// many minutes; each client drops a stream that shows no sign of life for 300 s (Claude Code's
// stream watchdog, Codex's stream_idle_timeout_ms, opencode's chunkTimeout). The daemon's
// keep-alives are events each client's SDK passes on, so the three CLIs, run at once against
// the stock daemon, each complete a turn whose first prompt is held in prefill (the worker's
// test hook, --test-hold-prefill, docs/development.md) for HOLD_S seconds past the moment all
// three are held, without dropping the stream: the requests held stay the same ones to the end
// of the hold, and the daemon counts no cancelled request. The hold is a duration on purpose (it is what is tested:
// longer than the clients' 300 s limits); everything else waits on states read from /v1/status.
//
// At the same time a client that leaves mid-prefill and sends the same request again gets the
// prefix the first attempt had evaluated: the abandoned prefill goes on into the prompt cache
// (--abandoned-prefill-s), and the retry, arriving meanwhile, joins it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, scratchDir } from './daemon.mjs';
import { runClaude, runCodex, runOpencode } from './agent_cli.mjs';

// (K3_AGENT_HOLD_S holds longer, by hand: Claude Code 2.1.332 would sit out 600 s on bytes alone)
const HOLD_S = Number(process.env.K3_AGENT_HOLD_S || 330);
const hold = path.join(scratchDir('long-prefill'), 'hold');
const figures = [];
let daemon;
before(async () => {
  // Prompt chunks of about 1,400 tokens, so every first prompt (6k-18k tokens) takes several:
  // the hook holds the worker after the first chunk of one of them, and the others before
  // theirs. A slot for each request a client sends meanwhile.
  // No per-request deadline (600 s by default): the idle limits are what is tested.
  daemon = await startDaemon('agent', ['--new-turn-tool-choice', 'required', '--prefill-mb', '8',
    '--parallel', '6', '--deadline-s', '0', '--log-level', 'info', '--test-hold-prefill', hold]);
});
after(async () => {
  assert.equal(await daemon.stop(), 0);
  for (const f of figures) console.log(`# ${f}`);
});

const status = async () => (await fetch(daemon.url + '/v1/status')).json();
const pause = (ms) => new Promise((r) => setTimeout(r, ms));
// The agents' first prompts (Claude Code also sends a short request of its own meanwhile), still
// being read.
const heldFirstPrompts = (st) => (st.active ?? []).filter((a) => a.stage === 'prompt' && a.prompt_tokens >= 4000);
async function metric(name) {
  const text = await (await fetch(daemon.url + '/metrics')).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.split(' ').pop()) : 0;
}
const outcome = (o) => metric(`k3serve:requests_total{outcome="${o}"}`);

test(`Claude Code, Codex and opencode each complete a turn whose first prompt is held in prefill for ${HOLD_S} s`, async () => {
  writeFileSync(hold, '');
  const runs = { 'Claude Code': runClaude(daemon, 'held'), Codex: runCodex(daemon, 'held'), opencode: runOpencode(daemon, 'held') };
  // Every run fails the test on its own if it ends early (a CLI that gave up exits non-zero).
  const settled = Promise.allSettled(Object.values(runs));
  let held;
  for (;;) {
    held = heldFirstPrompts(await status());
    if (held.length >= 3) break;
    await pause(200);
  }
  const heldAt = Date.now();
  const ids = held.map((a) => a.id);
  while (Date.now() - heldAt < HOLD_S * 1000) {
    await pause(5000);
    const now = heldFirstPrompts(await status());
    // The same requests, still held and not abandoned: no client gave up on its stream.
    for (const id of ids) {
      assert.ok(now.some((a) => a.id === id && !a.abandoned),
        `request ${id} was no longer held after ${((Date.now() - heldAt) / 1000).toFixed(0)} s: ${JSON.stringify(now)}`);
    }
  }
  const heldFor = (Date.now() - heldAt) / 1000;
  rmSync(hold);
  const results = await settled;
  for (const [i, name] of Object.keys(runs).entries()) {
    if (results[i].status === 'rejected') throw results[i].reason;
    figures.push(`${name}: turn done in ${results[i].value.r.seconds.toFixed(0)} s`);
  }
  figures.push(`first prompts of ${held.map((a) => a.prompt_tokens).join(', ')} tokens held ${heldFor.toFixed(0)} s in prefill`);
  assert.equal(await outcome('cancelled'), 0, 'a client dropped its stream');
});

test('a client that leaves mid-prefill and sends the request again gets what the first attempt evaluated', async () => {
  // (a completion's prompt shares no prefix with the agents' chats: its first chunk is a whole
  // one, not the few tokens up to where it leaves a cached prompt)
  const body = { model: 'k3', max_tokens: 4, stream: true, stream_options: { include_usage: true },
    prompt: Array.from({ length: 3000 }, (_, i) => `retry word${i % 97}`).join(' ') };
  const post = (signal) => fetch(daemon.url + '/v1/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal });
  const running = async (pred) => {
    for (;;) {
      const job = (await status()).active?.find((a) => a.prompt_tokens > 5000 && pred(a));
      if (job) return job;
      await pause(100);
    }
  };
  // On an idle daemon (a CLI's last request, left when it exited, may still be read on).
  while ((await status()).active?.length) await pause(200);
  writeFileSync(hold, '');
  const first = new AbortController();
  const res = await post(first.signal);
  assert.equal(res.status, 200);
  const left = await running((a) => a.prefill?.chunks_done >= 1 && a.prefill.done_tokens < a.prefill.total_tokens);
  const evaluated = left.prefill.done_tokens;
  first.abort();
  // The prompt is read on after its client left ...
  await running((a) => a.id === left.id && a.abandoned);
  // ... and the same request sent again takes it over, still held.
  const retry = post(undefined);
  await running((a) => a.id !== left.id && !a.abandoned);
  rmSync(hold);
  const text = await (await retry).text();
  const usage = text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)))
    .find((c) => c.usage)?.usage;
  assert.ok(usage, text.slice(-2000));
  const cached = usage.prompt_tokens_details.cached_tokens;
  figures.push(`retry after leaving at ${evaluated} of ${usage.prompt_tokens} prompt tokens: cached_tokens ${cached}`);
  assert.ok(cached >= evaluated, `the retry resumed ${cached} tokens; the first attempt had evaluated ${evaluated}`);
});
