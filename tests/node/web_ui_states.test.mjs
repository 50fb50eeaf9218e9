// The web UI's states and its handling of hostile model output, in a real headless browser
// against k3serve_fake_daemon (the real HTTP layer and worker over a scripted engine), because
// these need output, timing or a phase the tiny model cannot be made to produce: Markdown with a
// <script> that must not run, Stop cancelling a slow generation on the server, a request
// queued behind another, the loading phase with progress, a refused API key (read-only), an API
// error, and the daemon going away (disconnected, reconnecting). Screenshots go to
// build/test-artifacts/ui/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon } from './daemon.mjs';
import { launchBrowser, openPage, screenshot } from './browser.mjs';

let browser;

before(async () => { browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

// Waits for "ready"; sampling greedy so that the fake engine's scripted answer comes out as is.
async function ready(page) {
  await page.waitForSelector('#connection[data-state="ready"]', { timeout: 20000 });
  await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ temperature: 0 })));
}

async function countCancelled(url) {
  const m = await (await fetch(url + '/metrics')).text();
  return Number((m.match(/k3serve:requests_total\{outcome="cancelled"\} (\d+)/) || [])[1]);
}

const HOSTILE = [
  '# Result',
  'Some **bold** text and `inline code`.',
  '<script>window.__pwned = "script"</script>',
  '<img src="x" onerror="window.__pwned = \'img\'">',
  '[link](javascript:window.__pwned=1)',
  '',
  '```python',
  'def add(a, b):',
  '    return a + b  # sum',
  '```',
].join('\n');

test('Markdown and code are rendered; a <script> in the output does not run', async () => {
  const daemon = await startDaemon('fake', ['--answer', HOSTILE]);
  const page = await openPage(browser.context, daemon.url + '/');
  try {
    await ready(page);
    await page.fill('#input', 'Show me');
    await page.press('#input', 'Enter');
    await page.waitForFunction(() => document.querySelector('.msg.assistant')?.dataset.state === 'done', null, { timeout: 15000 });
    const md = page.locator('.msg.assistant .markdown');
    assert.equal(await md.locator('h1').textContent(), 'Result');
    assert.equal(await md.locator('strong').textContent(), 'bold');
    assert.equal(await md.locator('pre code.language-python').count(), 1);
    // highlight.js is loaded with the first code block: wait for the highlighting.
    await page.waitForSelector('.msg.assistant pre code.language-python .hljs-keyword');
    assert.equal(await md.locator('script').count(), 0);
    assert.equal(await md.locator('[onerror]').count(), 0);
    const hrefs = await md.locator('a').evaluateAll((as) => as.map((a) => a.getAttribute('href') || ''));
    assert.deepEqual(hrefs.filter((h) => /^\s*javascript:/i.test(h)), [], 'no javascript: links');
    assert.equal(await page.evaluate(() => window.__pwned), undefined, 'nothing from the output ran');
    // The copy button puts the code (not the button text) on the clipboard.
    await browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: daemon.url });
    await md.locator('pre .copy').click();
    await page.waitForFunction(() => document.querySelector('pre .copy').textContent === 'Copied');
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'def add(a, b):\n    return a + b  # sum\n');
    await screenshot(page, 'markdown');
    assert.deepEqual(page.problems.filter((p) => p.startsWith('pageerror')), []);
  } finally {
    await page.close();
    await daemon.stop();
  }
});

test('reasoning is folded away with its token count; the answer is rendered', async () => {
  const turn = 'Thinking it over.<|close|>think<|sep|><|open|>response<|sep|>The answer is **42**.' +
    '<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>';
  // The script is the whole thinking turn: no reasoning of the fake's own before it.
  const daemon = await startDaemon('fake', ['--xtml', turn, '--reasoning', '']);
  const page = await openPage(browser.context, daemon.url + '/');
  try {
    await ready(page);
    await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ temperature: 0, thinking: 'high' })));
    await page.fill('#input', 'What is the answer?');
    await page.press('#input', 'Enter');
    await page.waitForFunction(() => document.querySelector('.msg.assistant')?.dataset.state === 'done', null, { timeout: 15000 });
    const summary = await page.textContent('.msg.assistant .reasoning summary');
    assert.match(summary, /^Reasoning \([1-9]\d* tokens\)$/);
    assert.equal(await page.getAttribute('.msg.assistant .reasoning', 'open'), null, 'folded by default');
    assert.equal(await page.isVisible('.msg.assistant .reasoning-text'), false);
    assert.equal(await page.textContent('.msg.assistant .markdown strong'), '42');
    await page.click('.msg.assistant .reasoning summary');
    assert.equal(await page.textContent('.msg.assistant .reasoning-text'), 'Thinking it over.');
    await screenshot(page, 'reasoning');
  } finally {
    await page.close();
    await daemon.stop();
  }
});

test('Stop cancels the job on the server; a second request waits in the queue with its position', async () => {
  const daemon = await startDaemon('fake', ['--token-delay-ms', '150', '--answer', 'word '.repeat(200)]);
  const page = await openPage(browser.context, daemon.url + '/');
  const other = await openPage(browser.context, daemon.url + '/');
  try {
    await ready(page);
    await ready(other);
    await page.fill('#input', 'Write a lot');
    await page.click('#send');
    await page.waitForFunction(() => (document.querySelector('.msg.assistant .content')?.textContent ?? '').length >= 10,
      null, { timeout: 15000 });
    // A second page's request has to wait behind the first.
    await other.click('#new-conversation');
    await other.fill('#input', 'Me too');
    await other.click('#send');
    await other.waitForFunction(() => /queued: position 1/.test(document.querySelector('.msg.assistant .state')?.textContent),
      null, { timeout: 10000 });
    await page.waitForFunction(() => /#\d+ \d+ tokens generated/.test(document.querySelector('#fig-active').textContent));
    await page.waitForFunction(() => /^1 waiting/.test(document.querySelector('#fig-queue').textContent));
    await screenshot(other, 'queued');
    await page.keyboard.press('Escape');  // the shortcut for Stop
    await page.waitForFunction(() => document.querySelector('.msg.assistant')?.dataset.state === 'stopped');
    assert.equal(await page.textContent('.msg.assistant .state'), 'stopped');
    let cancelled = 0;
    for (let i = 0; i < 100 && cancelled < 1; i++) {
      cancelled = await countCancelled(daemon.url);
      if (cancelled < 1) await new Promise((res) => setTimeout(res, 50));
    }
    assert.equal(cancelled, 1, 'the server counted the cancelled request');
    // The queued one starts as soon as the first was cancelled; stop it too.
    await other.waitForFunction(() => document.querySelector('.msg.assistant')?.dataset.state === 'streaming',
      null, { timeout: 10000 });
    await other.click('#stop');
    assert.equal(await page.isDisabled('#send'), false);
  } finally {
    await page.close();
    await other.close();
    await daemon.stop();
  }
});

test('loading shows progress, then the UI becomes ready by itself', async () => {
  const daemon = await startDaemon('fake', ['--loading']);
  const page = await openPage(browser.context, daemon.url + '/');
  try {
    await page.waitForSelector('#banner:not([hidden])');
    assert.equal(await page.getAttribute('#connection', 'data-state'), 'loading');
    assert.match(await page.textContent('#banner-text'), /Loading the model: loading weights 40%/);
    assert.equal(await page.getAttribute('#banner-progress', 'value'), '0.4');
    // The box takes text while the model loads; Enter keeps it there instead of sending.
    assert.equal(await page.isDisabled('#input'), false);
    await page.fill('#input', 'Early message');
    await page.press('#input', 'Enter');
    assert.equal(await page.inputValue('#input'), 'Early message');
    await screenshot(page, 'loading');
    daemon.proc.stdin.write('loaded\n');  // loading ends when the test has seen it
    await ready(page);
    assert.equal(await page.isHidden('#banner'), true);
    assert.equal(await page.isDisabled('#send'), false);
  } finally {
    await page.close();
    await daemon.stop();
  }
});

test('a refused API key makes the UI read-only until a valid key is entered', async () => {
  const daemon = await startDaemon('fake', ['--api-key', 'sesame']);
  const page = await openPage(browser.context, daemon.url + '/');
  try {
    await page.waitForSelector('#connection[data-state="warn"]');
    assert.match(await page.textContent('#banner-text'), /Read-only: the server refused the API key/);
    assert.equal(await page.isDisabled('#send'), true);
    assert.equal(await page.isDisabled('#input'), true);
    await screenshot(page, 'read-only');
    await page.click('#banner-action');  // "Settings"
    await page.fill('#api-key', 'sesame');
    await page.click('#settings-save');
    await ready(page);
    assert.equal(await page.isDisabled('#send'), false);
    await page.fill('#input', 'Hello?');
    await page.press('#input', 'Enter');
    await page.waitForFunction(() => document.querySelector('.msg.assistant')?.dataset.state === 'done');
  } finally {
    await page.evaluate(() => localStorage.removeItem('k3serve-api-key'));
    await page.close();
    await daemon.stop();
  }
});

test('an API error is shown with its message; a lost daemon shows disconnected and reconnecting', async () => {
  const daemon = await startDaemon('fake');
  const page = await openPage(browser.context, daemon.url + '/');
  try {
    await ready(page);
    await page.click('#new-conversation');
    // min_p out of range for the server, but let through by the form: the server's own message.
    await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ min_p: 5 })));
    await page.fill('#input', 'Hello?');
    await page.press('#input', 'Enter');
    await page.waitForSelector('.msg.assistant.failed [role="alert"]');
    assert.match(await page.textContent('.msg.assistant .error-text'), /^Error: .*min_p/);
    await screenshot(page, 'error');
  } finally {
    await daemon.stop();
  }
  await page.waitForSelector('#connection[data-state="error"]', { timeout: 10000 });
  assert.match(await page.textContent('#banner-text'), /Disconnected from the server: reconnecting in \d+ s/);
  assert.equal(await page.isDisabled('#send'), true);
  await screenshot(page, 'disconnected');
  await page.close();
});
