// Accessibility of the web UI, checked by axe-core (npm, pinned in package.json) in a real
// headless Chromium against k3serve_fake_daemon: every view and state (empty, streaming,
// stopped, finished with model output that holds Markdown, a table, images, HTML and code,
// failed, loading, read-only, search, the drawers, the dialogs, completion and tokenizer), in
// both themes, at desktop and at phone width. No serious or critical violation is allowed; the
// counts of every impact are printed (and written to $K3_TEST_ARTIFACTS/ui/axe.json).
// One page goes through the states in turn, and each state is checked in every theme and width
// it exists in by switching the page's colour scheme and viewport, without reloading (the theme
// follows the system setting; the layout is CSS): all rules in the light theme, those whose
// outcome depends on colour in the dark one, where nothing else differs. One daemon serves everything but the streaming
// answer: it starts in its loading phase with an API key the page does not have yet (loading,
// then read-only), and answers at once; a second one writes slowly, for streaming and stopped.
// With K3_UI_SCREENSHOTS=1 every checked state is also saved as a screenshot.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { axeCheck } from './axe_check.mjs';
import { startDaemon } from './daemon.mjs';
import { artifacts, launchBrowser, openPage, screenshot } from './browser.mjs';

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

let browser, page, daemon, slow;
const counts = {};       // "state/theme/width" -> {minor, moderate, serious, critical}
const bad = [];          // serious and critical violations, described
const THEMES = ['light', 'dark'];
const WIDTHS = { desktop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } };

before(async () => {
  browser = await launchBrowser();
  [daemon, slow] = await Promise.all([startDaemon('fake', ['--loading', '--api-key', 'right-key', '--answer', RICH]),
    startDaemon('fake', ['--token-delay-ms', '150', '--answer', 'Slowly written words '.repeat(150)])]);
  page = await openPage(browser.context);
});
after(async () => {
  writeFileSync(path.join(artifacts, 'axe.json'), JSON.stringify(counts, null, 1));
  const total = { minor: 0, moderate: 0, serious: 0, critical: 0 };
  for (const c of Object.values(counts)) for (const k of Object.keys(total)) total[k] += c[k];
  console.log('axe: ' + Object.keys(counts).length + ' states checked (the dark ones for colour); violations by impact ' + JSON.stringify(total));
  await browser?.close();
  await Promise.all([daemon?.stop(), slow?.stop()]);
});

async function axe(label, colours) {
  const { counts: c, serious } = await axeCheck(page, { colours });
  for (const v of serious) bad.push(label + ': ' + v);
  counts[label] = c;
  if (process.env.K3_UI_SCREENSHOTS) await screenshot(page, 'axe-' + label.replace(/[^a-z0-9]+/gi, '-'));
}

let width = null;
async function setWidth(w) {
  if (w !== width) await page.setViewportSize(WIDTHS[w]);
  width = w;
}
// The state on screen, checked at each of the widths given: every rule in the light theme, the
// rules that depend on colour (COLOUR_RULES) again in the dark one (the DOM is the same).
async function check(state, widths = ['desktop', 'phone']) {
  for (const w of widths) {
    await setWidth(w);
    if (w === 'phone') await headerInOneRow(state);
    for (const theme of THEMES) {
      await page.emulateMedia({ colorScheme: theme });
      await axe(`${state}/${theme}/${w}`, theme !== THEMES[0]);
    }
  }
}

// On a phone the header's controls stay in one row above the tabs, whatever the state pill says
// (a button that wraps to a line of its own pushes the page down and looks broken).
async function headerInOneRow(state) {
  const boxes = await page.evaluate(() => [...document.querySelector('header.top').children]
    .filter((c) => !c.classList.contains('tabs') && c.offsetParent)
    .map((c) => ({ what: c.id || c.tagName, top: c.getBoundingClientRect().top, bottom: c.getBoundingClientRect().bottom })));
  const firstRowEnds = Math.min(...boxes.map((b) => b.bottom));
  const wrapped = boxes.filter((b) => b.top >= firstRowEnds);
  assert.deepEqual(wrapped.map((b) => b.what), [], `${state}: the header's controls wrap to a second row`);
}

async function ready() {
  await page.waitForSelector('#connection[data-state="ready"]', { timeout: 20000 });
  await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ temperature: 0 })));
}
const lastState = () => page.evaluate(() => [...document.querySelectorAll('.msg.assistant')].pop()?.dataset.state);
async function newConversation() {
  await page.keyboard.press('Alt+n');  // (its button is in a drawer on a phone)
  await page.waitForFunction(() => document.querySelectorAll('#messages .msg').length === 0);
}
async function send(text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}

test('axe: loading, then read-only (the daemon refuses the page\'s key)', async () => {
  await setWidth('desktop');
  await page.goto(daemon.url + '/');
  await page.waitForSelector('#connection[data-state="loading"]');
  await page.waitForSelector('#banner:not([hidden])');
  await check('loading');
  daemon.proc.stdin.write('loaded\n');
  await page.waitForSelector('#connection[data-state="warn"]', { timeout: 20000 });
  await check('read-only');
  await page.evaluate(() => localStorage.setItem('k3serve-api-key', 'right-key'));
  await page.reload();
  await ready();
});

test('axe: the chat empty, finished (Markdown, a table, images, HTML, code, math), failed, searched; the drawers', async () => {
  await setWidth('desktop');
  await newConversation();
  await check('empty');

  await send('Show everything');
  await page.waitForFunction(() => [...document.querySelectorAll('.msg.assistant')].pop()?.dataset.state === 'done', null, { timeout: 20000 });
  await page.waitForSelector('.msg.assistant pre code.language-python .hljs-keyword');
  await check('finished');
  for (const w of ['desktop', 'phone']) {
    await setWidth(w);
    await page.emulateMedia({ colorScheme: 'light' });
    await screenshot(page, `axe-finished-light-${w}`);
  }

  // Failed: a parameter the server refuses.
  await setWidth('desktop');
  await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ min_p: 5 })));
  await newConversation();
  await send('Fail please');
  await page.waitForSelector('.msg.assistant.failed [role="alert"]');
  await check('failed');
  await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ temperature: 0 })));

  // Search: in the list on a desktop, in the conversations drawer on a phone.
  await setWidth('desktop');
  await page.fill('#conversation-search', 'everything');
  await page.waitForFunction(() => document.querySelector('#search-count').textContent !== '');
  await check('search', ['desktop']);
  await setWidth('phone');
  await page.click('#toggle-conversations');
  await check('search, conversations drawer open', ['phone']);
  await page.fill('#conversation-search', '');
  await page.keyboard.press('Escape');
  await page.click('#toggle-figures');
  await check('figures drawer open', ['phone']);
  await page.keyboard.press('Escape');
});

test('axe: the settings and shortcuts dialogs, completion (empty and with output) and tokenizer with output', async () => {
  await setWidth('desktop');
  await page.click('#open-settings');
  await check('settings');
  // (at phone width now) every field fits in the dialog and has room: none is cut off at its
  // right edge or squeezed by its label
  const cut = await page.evaluate(() => {
    const d = document.querySelector('#settings').getBoundingClientRect();
    return [...document.querySelectorAll('#settings input, #settings select, #settings textarea')]
      .filter((e) => e.offsetParent && !e.closest('fieldset.display'))
      .filter((e) => e.getBoundingClientRect().right > d.right || e.getBoundingClientRect().width < d.width / 2).map((e) => e.id);
  });
  assert.deepEqual(cut, [], 'settings fields cut off or squeezed on a phone');
  await page.keyboard.press('Escape');
  await setWidth('desktop');
  await page.click('#open-shortcuts');
  await check('shortcuts');
  await page.keyboard.press('Escape');

  await setWidth('desktop');
  await page.click('#tab-completion');
  await check('completion, empty');  // the output area before anything is written into it
  await setWidth('desktop');
  await page.fill('#completion-prompt', 'Once upon a time');
  await page.click('#completion-run');
  await page.waitForFunction(() => document.querySelector('#completion-run').disabled === false && document.querySelector('#completion-output').textContent.length > 16);
  await check('completion');
  await setWidth('desktop');
  await page.click('#tab-tokenizer');
  await page.fill('#tokenizer-input', 'Hello tokens\nand lines');
  await page.waitForSelector('#tokenizer-output li');
  await check('tokenizer');
  await setWidth('desktop');
  await page.click('#tab-chat');
});

test('axe: an answer streaming, then stopped', async () => {
  // The slow daemon writes 3150 tokens at 150 ms each: it is still writing when the checks end.
  await setWidth('desktop');
  await page.goto(slow.url + '/');
  await ready();
  await newConversation();
  await send('Write slowly');
  await page.waitForFunction(() => ([...document.querySelectorAll('.msg.assistant .content')].pop()?.textContent ?? '').length > 40, null, { timeout: 20000 });
  await check('streaming');
  assert.equal(await lastState(), 'streaming');
  await page.click('#stop');
  await page.waitForFunction(() => [...document.querySelectorAll('.msg.assistant')].pop()?.dataset.state === 'stopped');
  await check('stopped');
  // (at phone width now) the answer's buttons (Copy, Edit, Continue, Regenerate, Delete) stay inside it
  const outside = await page.evaluate(() => {
    const last = [...document.querySelectorAll('.msg.assistant')].pop();
    const box = last.getBoundingClientRect();
    return [...last.querySelectorAll('.actions button')].filter((b) => b.getBoundingClientRect().right > box.right).map((b) => b.textContent);
  });
  assert.deepEqual(outside, [], 'buttons past the answer\'s edge on a phone');
  // (the read-only state's 401s and the failed answer's 400 are the browser's own console lines)
  assert.deepEqual(page.problems.filter((p) => !/Failed to load resource: the server responded with a status of 40[01]/.test(p)), []);
});

test('axe: no serious or critical violation anywhere', () => {
  assert.ok(Object.keys(counts).length >= 48, 'states checked: ' + Object.keys(counts).length);
  assert.deepEqual(bad, []);
});
