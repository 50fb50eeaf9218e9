// Accessibility of the web UI, checked by axe-core (npm, pinned in package.json) in a real
// headless Chromium against k3serve_fake_daemon: every view and state (empty, streaming,
// stopped, finished with model output that holds Markdown, a table, images, HTML and code,
// failed, loading, read-only, search, the drawers, the dialogs, completion and tokenizer), in
// both themes, at desktop and at phone width. No serious or critical violation is allowed; the
// counts of every impact are printed (and written to $K3_TEST_ARTIFACTS/ui/axe.json).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { startDaemon } from './daemon.mjs';
import { artifacts, launchBrowser, openPage, screenshot } from './browser.mjs';

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const RICH = [
  '# A heading', '', 'Some **bold**, *italic* and `inline code`, a [link](https://example.com/), and:', '',
  '- one', '- two', '', '1. first', '2. second', '', '> a quote', '',
  '| name | value |', '|---|---|', '| a | 1 |', '| b | 2 |', '',
  '```python', 'def f(x):', '    return x * 2  # twice', '```', '',
  '```', 'no language here', '```', '',
  '![a red dot](data:image/gif;base64,R0lGODlhAQABAIAAAP8AAAAAACH5BAAAAAAALAAAAAABAAEAAAICRAEAOw==)', '',
  '![](data:image/gif;base64,R0lGODlhAQABAAAAACw=)', '',
  '<details><summary>More</summary>hidden text</details> <kbd>Ctrl</kbd> <b>bold html</b> <img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">',
  '<form><input name="q"><button>Go</button></form><iframe src="/"></iframe>', '',
  'Math: $E = mc^2$ and $$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$',
].join('\n');

let browser, fast, slow;
const counts = {};       // "state/theme/width" -> {minor, moderate, serious, critical}
const bad = [];          // serious and critical violations, described

before(async () => {
  browser = await launchBrowser();
  [fast, slow] = await Promise.all([startDaemon('fake', ['--answer', RICH]),
    startDaemon('fake', ['--token-delay-ms', '150', '--answer', 'Slowly written words '.repeat(60)])]);
});
after(async () => {
  writeFileSync(path.join(artifacts, 'axe.json'), JSON.stringify(counts, null, 1));
  const total = { minor: 0, moderate: 0, serious: 0, critical: 0 };
  for (const c of Object.values(counts)) for (const k of Object.keys(total)) total[k] += c[k];
  console.log('axe: ' + Object.keys(counts).length + ' states checked; violations by impact ' + JSON.stringify(total));
  await browser?.close();
  await Promise.all([fast?.stop(), slow?.stop()]);
});

async function axe(page, label) {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE);
  const result = await page.evaluate(() => window.axe.run(document, {
    runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'] },
  }));
  const c = { minor: 0, moderate: 0, serious: 0, critical: 0 };
  for (const v of result.violations) {
    c[v.impact] += v.nodes.length;
    if (v.impact === 'serious' || v.impact === 'critical')
      bad.push(`${label}: ${v.id} (${v.impact}) ${v.help}: ${v.nodes.slice(0, 3).map((n) => n.target.join(' ') + ' ' + (n.failureSummary || '').replace(/\s+/g, ' ')).join(' | ')}`);
  }
  counts[label] = c;
}

async function ready(page) {
  await page.waitForSelector('#connection[data-state="ready"]', { timeout: 20000 });
  await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ temperature: 0 })));
}
const lastState = (page) => page.evaluate(() => [...document.querySelectorAll('.msg.assistant')].pop()?.dataset.state);

for (const theme of ['light', 'dark']) {
  for (const [width, height] of [[1280, 800], [390, 844]]) {
    const phone = width < 900;
    const at = (state) => `${state}/${theme}/${phone ? 'phone' : 'desktop'}`;
    test(`axe: ${theme} theme, ${phone ? 'phone' : 'desktop'} width`, async () => {
      const page = await openPage(browser.context);
      await page.setViewportSize({ width, height });
      await page.emulateMedia({ colorScheme: theme });
      await page.goto(fast.url + '/');
      await ready(page);
      await page.keyboard.press('Alt+n');  // new conversation (its button is in a drawer on a phone)
      await page.waitForFunction(() => document.querySelectorAll('#messages .msg').length === 0);
      await axe(page, at('empty'));

      // Finished: the rich answer.
      await page.fill('#input', 'Show everything');
      await page.press('#input', 'Enter');
      await page.waitForFunction(() => [...document.querySelectorAll('.msg.assistant')].pop()?.dataset.state === 'done', null, { timeout: 20000 });
      await page.waitForSelector('.msg.assistant pre code.language-python .hljs-keyword');
      await axe(page, at('finished'));
      await screenshot(page, `axe-finished-${theme}-${phone ? 'phone' : 'desktop'}`);

      // Failed: a parameter the server refuses.
      await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ min_p: 5 })));
      await page.keyboard.press('Alt+n');
      await page.waitForFunction(() => document.querySelectorAll('#messages .msg').length === 0);
      await page.fill('#input', 'Fail please');
      await page.press('#input', 'Enter');
      await page.waitForSelector('.msg.assistant.failed [role="alert"]');
      await axe(page, at('failed'));
      await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ temperature: 0 })));

      // Search.
      if (phone) await page.click('#toggle-conversations');
      await page.fill('#conversation-search', 'everything');
      await page.waitForFunction(() => document.querySelector('#search-count').textContent !== '');
      await axe(page, at(phone ? 'search, conversations drawer open' : 'search'));
      await page.fill('#conversation-search', '');
      if (phone) {
        await page.keyboard.press('Escape');
        await page.click('#toggle-figures');
        await axe(page, at('figures drawer open'));
        await page.keyboard.press('Escape');
      }

      // Dialogs.
      await page.click('#open-settings');
      await axe(page, at('settings'));
      await page.keyboard.press('Escape');
      // The rest looks the same at both widths (one column on a phone): checked once, on the desktop.
      if (phone) { await page.close(); return; }
      await page.click('#open-shortcuts');
      await axe(page, at('shortcuts'));
      await page.keyboard.press('Escape');

      // Completion and tokenizer, with output.
      await page.click('#tab-completion');
      await page.fill('#completion-prompt', 'Once upon a time');
      await page.click('#completion-run');
      await page.waitForFunction(() => document.querySelector('#completion-run').disabled === false && document.querySelector('#completion-output').textContent.length > 16);
      await axe(page, at('completion'));
      await page.click('#tab-tokenizer');
      await page.fill('#tokenizer-input', 'Hello tokens\nand lines');
      await page.waitForSelector('#tokenizer-output li');
      await axe(page, at('tokenizer'));
      await page.click('#tab-chat');

      // Streaming and stopped, on the slow daemon.
      await page.goto(slow.url + '/');
      await ready(page);
      await page.keyboard.press('Alt+n');
      await page.waitForFunction(() => document.querySelectorAll('#messages .msg').length === 0);
      await page.fill('#input', 'Write slowly');
      await page.press('#input', 'Enter');
      await page.waitForFunction(() => ([...document.querySelectorAll('.msg.assistant .content')].pop()?.textContent ?? '').length > 40, null, { timeout: 20000 });
      await axe(page, at('streaming'));
      assert.equal(await lastState(page), 'streaming');
      await page.click('#stop');
      await page.waitForFunction(() => [...document.querySelectorAll('.msg.assistant')].pop()?.dataset.state === 'stopped');
      await axe(page, at('stopped'));
      await page.close();
    });
  }

  test(`axe: ${theme} theme, loading and read-only`, async () => {
    const loading = await startDaemon('fake', ['--loading', '--api-key', 'right-key']);
    const page = await openPage(browser.context);
    await page.emulateMedia({ colorScheme: theme });
    try {
      await page.goto(loading.url + '/');
      await page.waitForSelector('#connection[data-state="loading"]');
      await page.waitForSelector('#banner:not([hidden])');
      await axe(page, `loading/${theme}/desktop`);
      loading.proc.stdin.write('loaded\n');
      await page.waitForSelector('#connection[data-state="warn"]', { timeout: 20000 });
      await axe(page, `read-only/${theme}/desktop`);
    } finally {
      await page.close();
      await loading.stop();
    }
  });
}

test('axe: no serious or critical violation anywhere', () => {
  assert.deepEqual(bad, []);
});
