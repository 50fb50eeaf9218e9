// What people use a chat UI for, in a real headless browser against k3serve_fake_daemon (the
// real HTTP layer and worker over a scripted engine): math set by KaTeX (served by the daemon,
// its fonts allowed by the CSP), Continue of a stopped answer (continue_final_message: the
// recorded prompt ends inside the open answer), edit and delete of any message with the
// alternatives kept as branches, JSON import, the display switches (follow the answer, reasoning
// while it streams, theme), and the figures' words: tokens/s beside s/token, tooltips for the
// trunk, the hit rate and the I/O share, and whose request the figures describe.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startDaemon } from './daemon.mjs';
import { launchBrowser, openPage, screenshot, storedConversations } from './browser.mjs';

let browser;
const scratch = mkdtempSync(path.join(os.tmpdir(), 'k3-webui-'));
before(async () => { browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

async function ready(page, params = { temperature: 0 }) {
  await page.waitForSelector('#connection[data-state="ready"]', { timeout: 20000 });
  await page.evaluate((p) => localStorage.setItem('k3serve.params', JSON.stringify(p)), params);
}
async function send(page, text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}
const lastAnswer = (page) => page.evaluate(() => [...document.querySelectorAll('.msg.assistant .content')].pop()?.textContent ?? '');
async function waitState(page, state) {
  await page.waitForFunction((s) => [...document.querySelectorAll('.msg.assistant')].pop()?.dataset.state === s, state, { timeout: 30000 });
}
async function withDaemon(args, fn) {
  const daemon = await startDaemon('fake', args);
  try { return await fn(daemon); } finally { await daemon.stop(); }
}

test('math: TeX is set by KaTeX as MathML in KaTeX\'s fonts; prices, code and bad TeX stay text', async () => {
  const answer = 'Inline $E = mc^2$ and \\(a^2 + b^2\\), shown:\n\n$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$\n\n'
    + 'It costs $5 and $10. Code: `$x$`. Broken: $\\nosuchmacro{1}$.';
  await withDaemon(['--answer', answer], async (daemon) => {
    const page = await openPage(browser.context, daemon.url + '/');
    const fonts = [];
    page.on('response', (r) => { if (r.url().includes('/vendor/katex-fonts/')) fonts.push([r.status(), r.headers()['content-type']]); });
    await ready(page);
    await send(page, 'Some math');
    await waitState(page, 'done');
    await page.waitForFunction(() => document.querySelectorAll('.msg.assistant .math[data-typeset]').length === 4);
    const got = await page.evaluate(async () => {
      await document.fonts.ready;
      const md = [...document.querySelectorAll('.msg.assistant .content')].pop();
      return {
        maths: md.querySelectorAll('.math math').length,
        display: md.querySelectorAll('.math.display math[display="block"] mfrac').length,
        annotations: [...md.querySelectorAll('annotation')].map((a) => a.textContent),
        failed: [...md.querySelectorAll('.math-error')].map((e) => e.textContent),
        code: md.querySelector('code').textContent,
        text: md.textContent,
        fontLoaded: [...document.fonts].some((f) => f.family.replace(/"/g, '') === 'KaTeX_Main' && f.status === 'loaded'),
      };
    });
    assert.equal(got.maths, 3);
    assert.equal(got.display, 1, 'the display formula is a block with a fraction');
    assert.deepEqual(got.annotations, ['E = mc^2', 'a^2 + b^2', '\\int_0^1 x^2\\,dx = \\frac{1}{3}']);
    assert.deepEqual(got.failed, ['$\\nosuchmacro{1}$']);
    assert.equal(got.code, '$x$');
    assert.match(got.text, /It costs \$5 and \$10\./);
    assert.equal(got.fontLoaded, true, 'KaTeX_Main was loaded');
    assert.ok(fonts.length > 0 && fonts.every(([s, t]) => s === 200 && t === 'font/woff2'), JSON.stringify(fonts));
    assert.deepEqual(page.problems, [], 'no CSP refusal or error');
    await screenshot(page, 'math');
    await page.close();
  });
});

test('Continue: a stopped answer is extended in place from where it stopped', async () => {
  const prompts = path.join(scratch, 'prompts.jsonl');
  await withDaemon(['--token-delay-ms', '40', '--answer', 'one two three four five six seven eight nine ten eleven twelve', '--record-prompts', prompts], async (daemon) => {
    const page = await openPage(browser.context, daemon.url + '/');
    await ready(page);
    const bodies = [];
    page.on('request', (r) => { if (r.url().endsWith('/v1/chat/completions')) bodies.push(JSON.parse(r.postData())); });
    await send(page, 'Count');
    await page.waitForFunction(() => ([...document.querySelectorAll('.msg.assistant .content')].pop()?.textContent ?? '').length > 12);
    await page.click('#stop');
    await waitState(page, 'stopped');
    const stopped = (await lastAnswer(page)).trim();
    assert.ok(stopped.length > 0 && stopped.length < 40, stopped);
    await page.click('.msg.assistant .actions .continue');
    await waitState(page, 'done');
    assert.equal(await page.locator('.msg.assistant').count(), 1, 'the same answer, not a new one');
    const full = (await lastAnswer(page)).replace(/\s+/g, ' ').trim();
    assert.ok(full.startsWith(stopped) && full.length > stopped.length + 20, full);
    const body = bodies[1];
    assert.equal(body.continue_final_message, true);
    const last = body.messages[body.messages.length - 1];
    assert.equal(last.role, 'assistant');
    assert.equal(last.content.trim(), stopped);
    // The engine was given the answer so far with its response left open.
    const prompt = JSON.parse(readFileSync(prompts, 'utf8').trim().split('\n').pop());
    assert.ok(prompt.endsWith('<|open|>response<|sep|>' + last.content), prompt.slice(-120));
    const stored = (await storedConversations(page))[0];
    assert.equal(stored.messages.length, 2);
    assert.equal(await page.locator('.msg.assistant .actions .continue').count(), 0, 'nothing left to continue');
    await page.close();
    // The API refuses continuing when the last message is not an answer, naming the field.
    const r = await fetch(daemon.url + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], continue_final_message: true }) });
    assert.equal(r.status, 400);
    assert.equal((await r.json()).error.param, 'continue_final_message');
  });
});

test('edit and delete any message; the alternatives are kept as branches', async () => {
  await withDaemon(['--answer', 'Fine answer.'], async (daemon) => {
    const page = await openPage(browser.context, daemon.url + '/');
    await ready(page);
    await page.click('#new-conversation');
    await send(page, 'First question');
    await waitState(page, 'done');
    await send(page, 'Second question');
    await waitState(page, 'done');
    // Edit the first message: a new version, answered again; the old branch stays reachable.
    await page.locator('.msg.user').first().locator('.actions .edit').click();
    await page.locator('.msg.user').first().locator('textarea.edit-input').fill('First, edited');
    await page.locator('.msg.user').first().locator('.save-edit').click();
    await waitState(page, 'done');
    assert.deepEqual(await page.locator('.msg.user .content').allTextContents(), ['First, edited']);
    assert.match(await page.locator('.msg.user').first().locator('.branch').textContent(), /2\s*\/\s*2/);
    await page.locator('.msg.user').first().getByRole('button', { name: 'Previous version' }).click();
    assert.deepEqual(await page.locator('.msg.user .content').allTextContents(), ['First question', 'Second question']);
    // Delete the second question: it and what follows it go.
    await page.locator('.msg.user').nth(1).locator('.actions .delete').click();
    assert.deepEqual(await page.locator('.msg.user .content').allTextContents(), ['First question']);
    await page.reload();
    await ready(page);
    assert.deepEqual(await page.locator('.msg.user .content').allTextContents(), ['First question']);
    await page.close();
  });
});

test('Import adds the conversations of an exported file; a bad file is refused by name', async () => {
  await withDaemon([], async (daemon) => {
    const page = await openPage(browser.context, daemon.url + '/');
    await ready(page);
    const file = path.join(scratch, 'import.json');
    writeFileSync(file, JSON.stringify({ format: 'k3serve-conversations', version: 1, conversations: [
      { id: 'imported-1', title: 'From a file', system: '', updated: Date.now(), messages: [
        { role: 'user', content: 'Imported question' }, { role: 'assistant', content: 'Imported answer' }] }] }));
    await page.setInputFiles('#import-file', file);
    await page.waitForSelector('#conversation-list li[data-id="imported-1"]');
    assert.match(await page.textContent('#toast-text'), /Imported 1 conversation\./);
    await page.click('#conversation-list li[data-id="imported-1"] .open');
    assert.deepEqual((await page.locator('#messages .content').allTextContents()).map((t) => t.trim()), ['Imported question', 'Imported answer']);
    assert.ok((await storedConversations(page)).some((c) => c.id === 'imported-1'));
    const bad = path.join(scratch, 'bad.json');
    writeFileSync(bad, '{"conversations": 3}');
    await page.setInputFiles('#import-file', bad);
    await page.waitForFunction(() => /Import failed: the file has no "conversations" list/.test(document.querySelector('#toast-text').textContent));
    await page.close();
  });
});

test('display switches: not following the answer, reasoning open while it streams, theme', async () => {
  const turn = 'Thinking it over slowly, step by step.<|close|>think<|sep|><|open|>response<|sep|>'
    + Array.from({ length: 30 }, (_, i) => 'Line ' + i + ' of the answer.').join('\n\n') + '<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>';
  // (the script is the whole thinking turn: no reasoning of the fake's own before it)
  await withDaemon(['--token-delay-ms', '5', '--xtml', turn, '--reasoning', ''], async (daemon) => {
    const page = await openPage(browser.context, daemon.url + '/');
    await page.setViewportSize({ width: 1100, height: 600 });
    await ready(page, { temperature: 0, thinking: 'high' });
    await page.evaluate(() => localStorage.setItem('k3serve.display', JSON.stringify({ autoScroll: false, reasoningOpen: true, theme: 'dark' })));
    await page.reload();
    await ready(page, { temperature: 0, thinking: 'high' });
    // Theme: dark by the switch, whatever the system says.
    await page.emulateMedia({ colorScheme: 'light' });
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
    const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.equal(bg, 'rgb(20, 21, 25)');
    await send(page, 'Think');
    // Reasoning open while it streams.
    await page.waitForFunction(() => document.querySelector('.msg.assistant .reasoning')?.open === true
      && document.querySelector('.msg.assistant')?.dataset.state === 'streaming', null, { timeout: 20000 });
    // Not following: the view stays at the top while the answer grows past the screen.
    const top = await page.evaluate(() => document.querySelector('#messages').scrollTop);
    await page.waitForFunction(() => { const m = document.querySelector('#messages'); return m.scrollHeight > m.clientHeight + 200; }, null, { timeout: 20000 });
    assert.equal(await page.evaluate(() => document.querySelector('#messages').scrollTop), top);
    await waitState(page, 'done');
    // The switches in Settings: theme light applies at once.
    await page.click('#open-settings');
    assert.equal(await page.isChecked('#d-autoscroll'), false);
    assert.equal(await page.isChecked('#d-reasoning'), true);
    await page.selectOption('#d-theme', 'light');
    await page.click('#settings-save');
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'light');
    await page.close();
  });
});

test('figures: tokens/s beside s/token, tooltips in plain words, whose request they describe', async () => {
  await withDaemon(['--token-delay-ms', '20', '--answer', 'A short answer of some tokens.'], async (daemon) => {
    const page = await openPage(browser.context, daemon.url + '/');
    await ready(page);
    await send(page, 'Hello');
    await waitState(page, 'done');
    await page.waitForFunction(() => /Last request #\d+ \(this page\)/.test(document.querySelector('#fig-whose').textContent), null, { timeout: 10000 });
    assert.match(await page.textContent('#fig-spt'), /^[\d.]+ m?s \([\d.,]+ tokens\/s\)$/);
    // The answer's own line says the same in the same words (a rate of 10 or more without decimals).
    assert.match(await page.textContent('.msg.assistant .stats'), /[\d.]+ m?s\/token \((\d\.\d\d|[1-9][\d,]*) tokens\/s\)/);
    for (const id of ['fig-trunk', 'fig-io', 'fig-retention']) {
      const title = await page.evaluate((i) => document.getElementById(i).previousElementSibling.title, id);
      assert.ok(title.length > 20, id + ' has a tooltip: ' + title);
    }
    // Another client's request is not labelled as this page's.
    await fetch(daemon.url + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'from curl' }], max_tokens: 3 }) });
    await page.waitForFunction(() => /Last request #\d+$/.test(document.querySelector('#fig-whose').textContent), null, { timeout: 10000 });
    await page.close();
  });
  // An answer too quick for any status poll to see it running is still known as this page's.
  await withDaemon(['--answer', 'At once.'], async (daemon) => {
    const page = await openPage(browser.context, daemon.url + '/');
    await ready(page);
    await send(page, 'Quick?');
    await waitState(page, 'done');
    await page.waitForFunction(() => /^Last request #\d+ \(this page\)$/.test(document.querySelector('#fig-whose').textContent), null, { timeout: 10000 })
      .catch(async () => assert.fail('the figures say: ' + await page.textContent('#fig-whose')));
    await page.close();
  });
});
