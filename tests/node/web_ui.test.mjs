// The web UI in a real headless browser (Debian's Chromium driven by playwright-core) against the
// real daemon on the tiny synthetic model: it loads with the right headers, streams a chat answer,
// shows the live engine figures while generating, regenerates with the prompt cache (cached
// tokens > 0), keeps conversations across a reload (rename, delete, undo), streams a completion,
// shows the same tokens as /tokenize, and fits a phone-sized screen. Screenshots of each view go
// to build/test-artifacts/ui/ (docs/web-ui.md).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon } from './daemon.mjs';
import { launchBrowser, openPage, screenshot, storedConversations } from './browser.mjs';

let daemon, browser;

before(async () => {
  // A memory budget far below the model's size, so the trunk and the experts are read from disk
  // for every token: real bytes-read figures, and about 10 ms per token to watch them change.
  daemon = await startDaemon('tiny', ['--trunk-gb', '0.001', '--cache-gb', '0.0001']);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  assert.equal(await daemon.stop(), 0);
});

// Page problems that mean the UI is broken: uncaught errors and Content-Security-Policy refusals.
function seriousProblems(page) {
  return page.problems.filter((p) => p.startsWith('pageerror') || /Content Security Policy|Refused to/.test(p));
}

async function ready(page) {
  await page.waitForSelector('#connection[data-state="ready"]', { timeout: 20000 });
}

async function cancelledCount() {
  const m = await (await fetch(daemon.url + '/metrics')).text();
  return Number((m.match(/k3serve:requests_total\{outcome="cancelled"\} (\d+)/) || [])[1]);
}

// Greedy and short: the tiny model's answers are random text, but the same every time.
async function greedySettings(page, maxTokens) {
  await page.click('#open-settings');
  await page.fill('#p-temperature', '0');
  await page.fill('#p-max-tokens', String(maxTokens));
  await page.click('#settings-save');
  await page.waitForSelector('#settings', { state: 'hidden' });
}

test('the UI files are served with their types, caching headers and a strict CSP', async () => {
  const index = await fetch(daemon.url + '/');
  assert.equal(index.status, 200);
  assert.match(index.headers.get('content-type'), /^text\/html; charset=utf-8/);
  const csp = index.headers.get('content-security-policy');
  assert.match(csp, /script-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  assert.match(csp, /default-src 'none'/);
  assert.equal(index.headers.get('cache-control'), 'no-cache');
  assert.equal(index.headers.get('x-content-type-options'), 'nosniff');
  const etag = index.headers.get('etag');
  assert.ok(etag, 'index.html has an ETag');
  assert.equal((await fetch(daemon.url + '/', { headers: { 'If-None-Match': etag } })).status, 304);
  const js = await fetch(daemon.url + '/app.js');
  assert.match(js.headers.get('content-type'), /^application\/javascript; charset=utf-8/);
  const css = await fetch(daemon.url + '/style.css');
  assert.match(css.headers.get('content-type'), /^text\/css/);
  for (const lib of ['marked.min.js', 'purify.min.js', 'highlight.min.js']) {
    const r = await fetch(daemon.url + '/vendor/' + lib);
    assert.equal(r.status, 200, lib);
    assert.match(r.headers.get('cache-control'), /max-age=86400/);
    assert.ok((await r.text()).length > 10000, lib + ' is the real library');
    // Served as embedded, never compressed per request (Brotli on highlight.js takes seconds).
    const br = await fetch(daemon.url + '/vendor/' + lib, { headers: { 'Accept-Encoding': 'br, gzip' } });
    assert.equal(br.headers.get('content-encoding'), null, lib);
  }
  assert.equal((await fetch(daemon.url + '/vendor/../daemon_config.cpp')).status, 404);
  assert.equal((await fetch(daemon.url + '/nope.js')).status, 404);
});

test('chat: streams an answer, shows figures while generating, regenerates from the cache', async () => {
  const page = await openPage(browser.context, daemon.url + '/');
  await ready(page);
  const served = (await (await fetch(daemon.url + '/v1/models')).json()).data[0].id;
  assert.equal(await page.textContent('#model-name'), '· ' + served, 'the header names the served model');
  await screenshot(page, 'chat-empty');
  // Long enough (about 5 s) for several status polls during the generation.
  await greedySettings(page, 800);

  await page.fill('#input', 'Write **bold** words and a list.');
  await page.press('#input', 'Enter');
  // While it generates, the figures panel shows the running request and its figures change.
  await page.waitForFunction(() => document.querySelector('.msg.assistant')?.dataset.state === 'streaming', null, { timeout: 30000 });
  await page.waitForFunction(() => /tokens generated/.test(document.querySelector('#fig-active').textContent), null, { timeout: 10000 });
  const during = await page.textContent('#fig-active');
  await page.waitForFunction((before) => document.querySelector('#fig-active').textContent !== before, during);
  assert.equal(await page.getAttribute('.msg.assistant', 'data-state'), 'streaming', 'the figures changed during the generation');
  await screenshot(page, 'chat-generating');
  await page.waitForFunction(() => document.querySelector('.msg.assistant')?.dataset.state === 'done', null, { timeout: 30000 });
  const answer = await page.textContent('.msg.assistant .content');
  assert.ok(answer.length > 0, 'the answer has text');
  assert.equal(await page.textContent('.msg.user .content'), 'Write **bold** words and a list.');
  await page.waitForFunction(() => /ms|s$/.test(document.querySelector('#fig-spt').textContent));
  assert.match(await page.textContent('#fig-ttft'), /\d/);
  assert.match(await page.textContent('#fig-trunk'), /^[\d.]+ [KMG]B$/, 'trunk bytes read per token');
  assert.match(await page.textContent('#fig-experts'), /^[\d.]+ [KMG]?B$/);
  assert.match(await page.textContent('#fig-io'), /%$/);
  assert.match(await page.textContent('.msg.assistant .stats'), /\d+ tokens/);
  const status = await (await fetch(daemon.url + '/v1/status')).json();
  assert.ok(status.tokens.length > 0, '/v1/status has token samples');
  assert.equal(status.phase, 'ready');

  // The same answer as the API gives for the same request (greedy).
  const api = await (await fetch(daemon.url + '/v1/chat/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Write **bold** words and a list.' }],
      max_completion_tokens: 800, temperature: 0, reasoning_effort: 'none' }),
  })).json();
  // The model's raw text, as kept in the browser.
  const rendered = (await storedConversations(page))[0].messages[1].content;
  assert.equal(rendered, api.choices[0].message.content);

  // A second turn, then regenerate it: the worker resumes from its state at the end of the first
  // turn's prompt, so the cached tokens are shown (a first turn's regenerate re-reads its prompt:
  // the session keeps the state at the end of each prompt, and the last prompt token has to be
  // evaluated again for its logits).
  await greedySettings(page, 40);
  await page.fill('#input', 'And another one?');
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant').length === 2 &&
    [...document.querySelectorAll('.msg.assistant')].pop().dataset.state === 'done', null, { timeout: 30000 });
  await page.click('.msg.assistant:last-child .actions .regenerate');
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant').length === 2 &&
    [...document.querySelectorAll('.msg.assistant')].pop().dataset.state === 'done', null, { timeout: 30000 });
  const stats = await page.textContent('.msg.assistant:last-child .stats');
  const cached = Number((stats.match(/(\d+) cached/) || [])[1]);
  assert.ok(cached > 0, 'cached tokens shown after regenerate: ' + stats);
  await page.waitForFunction(() => /^[1-9]\d* of \d+/.test(document.querySelector('#fig-cached').textContent));
  await screenshot(page, 'chat-answer');
  assert.deepEqual(seriousProblems(page), []);
  await page.close();
});

test('conversations survive a reload and can be renamed, deleted and restored', async () => {
  const page = await openPage(browser.context, daemon.url + '/');
  await ready(page);
  // The conversation of the previous test is still there.
  await page.waitForSelector('#conversation-list li');
  const titles = await page.$$eval('#conversation-list .open', (els) => els.map((e) => e.textContent));
  assert.ok(titles.includes('Write **bold** words and a list.'), JSON.stringify(titles));
  assert.equal(await page.locator('#messages .msg').count(), 4);

  // A second conversation with a system prompt.
  await page.click('#new-conversation');
  assert.equal(await page.locator('#messages .msg').count(), 0);
  await page.click('#system-box summary');
  await page.fill('#system-prompt', 'Answer briefly.');
  await page.locator('#system-prompt').blur();
  await page.fill('#input', 'Second conversation');
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => document.querySelector('.msg.assistant')?.dataset.state === 'done', null, { timeout: 30000 });

  await page.reload();
  await ready(page);
  assert.equal(await page.locator('#conversation-list li').count(), 2);
  assert.equal(await page.inputValue('#system-prompt'), 'Answer briefly.');
  assert.equal(await page.textContent('#messages .msg.user .content'), 'Second conversation');

  // Rename it.
  await page.click('#conversation-list li:first-child .rename');
  await page.fill('.rename-input', 'Renamed chat');
  await page.press('.rename-input', 'Enter');
  await page.waitForSelector('#conversation-list .open:text("Renamed chat")');
  await page.reload();
  await ready(page);
  assert.equal(await page.textContent('#conversation-list li:first-child .open'), 'Renamed chat');

  // Edit the message in place; Cancel leaves it as it was.
  await page.click('.msg.user .actions .edit');
  assert.equal(await page.inputValue('.msg.user .edit-input'), 'Second conversation');
  await page.click('.msg.user .cancel-edit');
  assert.equal(await page.locator('#messages .msg').count(), 2);
  assert.equal(await page.locator('.edit-input').count(), 0);

  // Delete, then undo.
  // Both are asynchronous (IndexedDB): wait for the list to change.
  await page.click('#conversation-list li:first-child .delete');
  await page.waitForFunction(() => document.querySelectorAll('#conversation-list li').length === 1);
  await page.click('#toast-undo');
  await page.waitForFunction(() => document.querySelectorAll('#conversation-list li').length === 2);
  await screenshot(page, 'conversations');
  assert.deepEqual(seriousProblems(page), []);
  await page.close();
});

test('Stop cancels the job on the server', async () => {
  const page = await openPage(browser.context, daemon.url + '/');
  await ready(page);
  await page.click('#new-conversation');
  await greedySettings(page, 3000);
  const before = await cancelledCount();
  await page.fill('#input', 'Write a lot');
  await page.click('#send');
  await page.waitForFunction(() => (document.querySelector('.msg.assistant .content')?.textContent ?? '').length >= 20,
    null, { timeout: 30000 });
  await page.click('#stop');
  await page.waitForFunction(() => document.querySelector('.msg.assistant')?.dataset.state === 'stopped');
  let after = before;
  for (let i = 0; i < 100 && after === before; i++) {
    after = await cancelledCount();
    if (after === before) await new Promise((res) => setTimeout(res, 50));
  }
  assert.equal(after, before + 1, 'the server counted the cancelled request');
  const status = await (await fetch(daemon.url + '/v1/status')).json();
  assert.deepEqual(status.active, [], 'nothing runs any more');
  assert.ok(status.last_request.generated_tokens < 3000, 'stopped early');
  assert.equal(await page.isDisabled('#send'), false);
  await greedySettings(page, 300);
  await page.close();
});

test('completion view streams a continuation of a raw prompt', async () => {
  const page = await openPage(browser.context, daemon.url + '/');
  await ready(page);
  await page.click('#tab-completion');
  await page.fill('#completion-prompt', 'Once upon a time');
  await page.click('#completion-run');
  await page.waitForFunction(() => /tokens/.test(document.querySelector('#completion-state').textContent), null, { timeout: 30000 });
  assert.equal(await page.textContent('#completion-output .prompt-text'), 'Once upon a time');
  assert.ok((await page.textContent('#completion-output .continuation')).length > 0);
  await screenshot(page, 'completion');
  assert.deepEqual(seriousProblems(page), []);
  await page.close();
});

test('tokenizer view shows the same tokens as /tokenize', async () => {
  const page = await openPage(browser.context, daemon.url + '/');
  await ready(page);
  await page.keyboard.press('Alt+3');
  const text = 'Hello, world!\n  tokens: 12345 ünïcode';
  await page.fill('#tokenizer-input', text);
  const expected = await (await fetch(daemon.url + '/tokenize', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ content: text }),
  })).json();
  await page.waitForFunction((n) => document.querySelectorAll('#tokenizer-output .token').length === n, expected.count);
  const ids = await page.$$eval('#tokenizer-output .token', (els) => els.map((e) => Number(e.dataset.id)));
  assert.deepEqual(ids, expected.tokens);
  assert.match(await page.textContent('#tokenizer-count'), new RegExp('^' + expected.count + ' tokens'));
  await screenshot(page, 'tokenizer');
  await page.close();
});

test('settings are validated, kept in the browser, and limited by /props', async () => {
  const page = await openPage(browser.context, daemon.url + '/');
  await ready(page);
  await page.keyboard.press('Alt+s');
  await page.waitForSelector('#settings[open]');
  const props = await (await fetch(daemon.url + '/props')).json();
  assert.equal(await page.getAttribute('#p-max-tokens', 'max'), String(props.n_ctx));
  assert.match(await page.textContent('#limits-note'), new RegExp('Context ' + props.n_ctx));
  await page.fill('#p-top-p', '3');
  await page.click('#settings-save');
  assert.match(await page.textContent('#settings-error'), /top_p/);
  await page.fill('#p-top-p', '0.9');
  await page.fill('#p-seed', '42');
  await page.selectOption('#p-thinking', 'high');
  await screenshot(page, 'settings');
  await page.click('#settings-save');
  await page.waitForSelector('#settings', { state: 'hidden' });
  await page.reload();
  await ready(page);
  const params = await page.evaluate(() => JSON.parse(localStorage.getItem('k3serve.params')));
  assert.equal(params.top_p, 0.9);
  assert.equal(params.seed, 42);
  assert.equal(params.thinking, 'high');
  await page.close();
});

test('phone-sized screen: one column, panels as drawers, dark theme', async () => {
  const page = await browser.context.newPage();
  await page.setViewportSize({ width: 390, height: 844 });
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.goto(daemon.url + '/');
  await ready(page);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, 'no sideways scrolling on a phone: ' + overflow + ' px too wide');
  assert.equal(await page.isVisible('#figures'), false);
  assert.equal(await page.isVisible('#conversations'), false);
  assert.equal(await page.isVisible('#input'), true);
  await screenshot(page, 'phone-chat');
  await page.click('#toggle-figures');
  assert.equal(await page.isVisible('#figures'), true);
  assert.equal(await page.getAttribute('#toggle-figures', 'aria-expanded'), 'true');
  await screenshot(page, 'phone-figures');
  await page.click('#toggle-figures');
  await page.click('#toggle-conversations');
  assert.equal(await page.isVisible('#conversations'), true);
  await screenshot(page, 'phone-conversations');
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(bg, 'rgb(20, 21, 25)', 'dark theme follows the system');
  await page.close();
});
