// The chat with answers that take minutes, in a real headless browser against
// k3serve_fake_daemon (the real HTTP layer and worker over a scripted engine with a delay per
// token): a message typed while an answer streams is kept; the newest text and the finished
// answer's actions are never under the message box; a reader who scrolls back stays there and can
// select text while the answer grows; switching conversations does not cancel it; screen readers
// hear the answer once; failures are not all red; figures say they are stale while disconnected;
// the chart stays its size with the drawer closed; the page paints without highlight.js; no
// /favicon.ico 404; no temperature of the UI's own; drawers close with Esc; focus after rename
// and delete; a long conversation opens at its end; two tabs merge; export.
// Every wait is on a state, never on a time.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon } from './daemon.mjs';
import { launchBrowser, openPage, screenshot, storedConversations } from './browser.mjs';

let browser, daemon;
const PARAGRAPHS = Array.from({ length: 16 }, (_, i) => 'Paragraph ' + i + ' of the answer, long enough to wrap a line or two on a narrow screen.').join('\n\n');

before(async () => {
  browser = await launchBrowser();
  daemon = await startDaemon('fake', ['--token-delay-ms', '5', '--answer', PARAGRAPHS]);
});
after(async () => { await browser?.close(); await daemon?.stop(); });

// Ready, and greedy so that the fake engine's scripted answer comes out as it is.
async function ready(page, greedy = true) {
  await page.waitForSelector('#connection[data-state="ready"]', { timeout: 20000 });
  if (greedy) await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ temperature: 0 })));
}

async function countCancelled(url) {
  const m = await (await fetch(url + '/metrics')).text();
  return Number((m.match(/k3serve:requests_total\{outcome="cancelled"\} (\d+)/) || [])[1]);
}

const answerText = (page) => page.evaluate(() => [...document.querySelectorAll('.msg.assistant .content')].pop()?.textContent ?? '');
const lastState = (page) => page.evaluate(() => [...document.querySelectorAll('.msg.assistant')].pop()?.dataset.state);
async function waitLonger(page, than) {
  await page.waitForFunction((n) => ([...document.querySelectorAll('.msg.assistant .content')].pop()?.textContent ?? '').length > n, than, { timeout: 20000 });
}
async function waitDone(page) {
  await page.waitForFunction(() => [...document.querySelectorAll('.msg.assistant')].pop()?.dataset.state === 'done', null, { timeout: 30000 });
}

test('while an answer streams: typed text is kept, reading back is not disturbed, selection survives, one announcement', async () => {
  const page = await openPage(browser.context, daemon.url + '/');
  await page.setViewportSize({ width: 1100, height: 640 });
  await ready(page);
  // Count changes inside live regions (what a screen reader is told).
  await page.evaluate(() => {
    window.__liveMutations = 0;
    new MutationObserver((records) => {
      for (const r of records) {
        const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
        if (el && el.closest('[aria-live], [role="log"], [role="status"], [role="alert"]')) window.__liveMutations++;
      }
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  const sent = [];
  page.on('request', (r) => { if (r.url().endsWith('/v1/chat/completions')) sent.push(JSON.parse(r.postData())); });
  await page.fill('#input', 'Write many paragraphs');
  await page.press('#input', 'Enter');
  await waitLonger(page, 400);

  // 1. Enter while it streams keeps the typed message in the box.
  await page.fill('#input', 'My next question');
  await page.press('#input', 'Enter');
  assert.equal(await page.inputValue('#input'), 'My next question');
  assert.match(await page.textContent('#composer-note'), /still being written/);

  // 3. Scroll back to the first paragraph and select it: new text neither moves the view nor
  // replaces the selected paragraph.
  await page.waitForFunction(() => { const m = document.querySelector('#messages'); return m.scrollHeight > m.clientHeight + 50; }, null, { timeout: 20000 });
  await page.mouse.move(500, 300);
  await page.mouse.wheel(0, -100000);
  await page.waitForFunction(() => document.querySelector('.msg.user').getBoundingClientRect().bottom > 0);
  await page.evaluate(() => {
    const p = document.querySelector('.msg.assistant .content p');
    window.__selected = p;
    const range = document.createRange();
    range.selectNodeContents(p);
    getSelection().removeAllRanges();
    getSelection().addRange(range);
  });
  const before = (await answerText(page)).length;
  await waitLonger(page, before + 300);
  const check = await page.evaluate(() => ({
    connected: window.__selected.isConnected,
    selection: getSelection().toString(),
    userVisible: document.querySelector('.msg.user').getBoundingClientRect().bottom > document.querySelector('#messages').getBoundingClientRect().top,
  }));
  assert.equal(check.connected, true, 'the selected paragraph is the same element');
  assert.match(check.selection, /^Paragraph 0 of the answer/);
  assert.equal(check.userVisible, true, 'the view stayed where the reader scrolled');
  await screenshot(page, 'long-reading-back');

  // Back at the bottom, it follows again; when it is done, its stats and actions are in view,
  // above the message box (2).
  await page.mouse.wheel(0, 100000);
  await waitDone(page);
  const geometry = await page.evaluate(() => {
    const last = [...document.querySelectorAll('.msg.assistant')].pop();
    return { actions: last.querySelector('.actions').getBoundingClientRect().bottom,
      stats: last.querySelector('.stats').getBoundingClientRect().bottom,
      box: document.querySelector('#composer').getBoundingClientRect().top,
      view: document.querySelector('#messages').getBoundingClientRect().bottom };
  });
  assert.ok(geometry.actions <= geometry.box && geometry.actions <= geometry.view + 1, JSON.stringify(geometry));
  assert.ok(await page.isVisible('.msg.assistant .actions .regenerate'));
  await screenshot(page, 'long-done');

  // 6. The live regions changed a handful of times, not every token.
  const live = await page.evaluate(() => window.__liveMutations);
  assert.ok(live <= 12, 'live-region mutations during the whole answer: ' + live);
  assert.match(await page.textContent('#announcer'), /^Answer: Paragraph 0/);
  assert.equal(sent.length, 1, 'the message typed while streaming was not sent');
  await page.close();
});

test('switching or starting a conversation does not cancel the running answer', async () => {
  const page = await openPage(browser.context, daemon.url + '/');
  await ready(page);
  await page.click('#new-conversation');
  const cancelled = await countCancelled(daemon.url);
  await page.fill('#input', 'Keep going');
  await page.press('#input', 'Enter');
  await waitLonger(page, 100);
  const id = await page.evaluate(() => document.querySelector('#conversation-list [aria-current="true"]').closest('li').dataset.id);
  await page.click('#new-conversation');
  assert.equal(await page.locator('#messages .msg').count(), 0);
  await page.click('#conversation-list li[data-id="' + id + '"] .open');
  await waitDone(page);
  assert.equal((await answerText(page)).replace(/\s+/g, ' ').trim(), PARAGRAPHS.replace(/\s+/g, ' '));
  assert.equal(await countCancelled(daemon.url), cancelled, 'nothing was cancelled');
  await page.close();
});

test('a failed answer is not all red; figures say they are stale while the daemon is away', async () => {
  const other = await startDaemon('fake', ['--answer', 'Fine.']);
  const page = await openPage(browser.context, other.url + '/');
  try {
    await ready(page, false);
    await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ min_p: 5 })));
    const sent = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
    await page.fill('#input', 'Hello?');
    await page.press('#input', 'Enter');
    // The UI sends no temperature of its own: the server's default (/props) applies.
    assert.equal(JSON.parse((await sent).postData()).temperature, undefined);
    await page.waitForSelector('.msg.assistant.failed [role="alert"]');
    const colors = await page.evaluate(() => ({
      who: getComputedStyle(document.querySelector('.msg.assistant .who')).color,
      muted: getComputedStyle(document.querySelector('.msg.user .who')).color,
      user: getComputedStyle(document.querySelector('.msg.user .content')).color,
      body: getComputedStyle(document.body).color,
    }));
    assert.equal(colors.who, colors.muted, 'the failed answer\'s labels keep their colour');
    assert.equal(colors.user, colors.body);
  } finally {
    await other.stop();
  }
  await page.waitForSelector('#figures[data-stale="true"]', { timeout: 15000 });
  assert.match(await page.textContent('#figures-stale'), /Not updated since/);
  await page.close();
});

test('phone: the chart keeps its size with the drawer closed; Esc closes a drawer', async () => {
  const page = await browser.context.newPage();
  await page.addInitScript(() => Object.defineProperty(window, 'devicePixelRatio', { get: () => 2 }));
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(daemon.url + '/');
  await ready(page);
  // Three polls with the drawer closed.
  for (let i = 0; i < 3; i++) {
    const stamp = await page.getAttribute('#figure-list', 'data-updated');
    await page.waitForFunction((s) => document.querySelector('#figure-list').dataset.updated !== s, stamp, { timeout: 10000 });
  }
  const width = await page.evaluate(() => document.querySelector('#chart').width);
  assert.ok(width <= 2 * 400, 'canvas width ' + width);
  await page.click('#toggle-figures');
  await page.waitForFunction(() => document.querySelector('#chart').width === Math.round(document.querySelector('#chart').clientWidth * 2));
  await page.keyboard.press('Escape');
  assert.equal(await page.isVisible('#figures'), false);
  assert.equal(await page.evaluate(() => document.activeElement.id), 'toggle-figures');
  await page.click('#toggle-conversations');
  assert.equal(await page.isVisible('#conversations'), true);
  await page.keyboard.press('Escape');
  assert.equal(await page.isVisible('#conversations'), false);
  await page.close();
});

test('first paint without highlight.js, no 404s; code without a language is not auto-detected', async () => {
  const code = await startDaemon('fake', ['--answer', 'Code:\n\n```\nfor x in y: print(x)\n```\n\n```python\ndef f():\n    return 1\n```\n\n<form action="/x"><input name="q"></form><style>body{display:none}</style>\n\n![](data:image/gif;base64,R0lGODlhAQABAAAAACw=)']);
  const page = await browser.context.newPage();
  const requested = [];
  const missing = [];
  page.on('response', (r) => { requested.push(new URL(r.url()).pathname); if (r.status() === 404) missing.push(r.url()); });
  try {
    await page.goto(code.url + '/');
    await ready(page, false);
    assert.equal(requested.includes('/vendor/highlight.min.js'), false, 'highlight.js is not loaded with the page');
    assert.deepEqual(missing, []);
    await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ temperature: 0 })));
    await page.fill('#input', 'Show code');
    await page.press('#input', 'Enter');
    await waitDone(page);
    await page.waitForSelector('.msg.assistant pre code.language-python .hljs-keyword');
    const calls = await page.evaluate(() => {
      let n = 0;
      const orig = window.hljs.highlightAuto;
      window.hljs.highlightAuto = (...a) => { n++; return orig.apply(window.hljs, a); };
      return new Promise((res) => requestAnimationFrame(() => res(n)));
    });
    assert.equal(calls, 0);
    assert.equal(await page.locator('.msg.assistant pre code:not([class*="language-"]) span').count(), 0, 'no auto-detected highlighting');
    const md = page.locator('.msg.assistant .markdown');
    assert.equal(await md.locator('form, input, style').count(), 0, 'no form, input or style from the output');
    assert.equal(await md.locator('img:not([alt])').count(), 0);
    assert.ok((await md.locator('img').getAttribute('alt')).length > 0);
    assert.deepEqual(missing, []);
    await screenshot(page, 'code-blocks');
  } finally {
    await page.close();
    await code.stop();
  }
});

test('rename and delete keep the focus; a long conversation opens at its end', async () => {
  const page = await openPage(browser.context, daemon.url + '/');
  await ready(page);
  // A long conversation in the first UI's format: moved into IndexedDB and opened at its end.
  const messages = Array.from({ length: 40 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: 'Message ' + i + '\n\nwith two paragraphs' }));
  await page.evaluate((m) => {
    localStorage.setItem('k3serve.conversations', JSON.stringify([{ id: 'long1', title: 'Long one', system: '', messages: m, updated: Date.now() }]));
    localStorage.setItem('k3serve.current', JSON.stringify('long1'));
  }, messages);
  await page.reload();
  await ready(page);
  await page.waitForSelector('.msg.assistant >> text=Message 39');
  const at = await page.evaluate(() => { const m = document.querySelector('#messages'); return m.scrollHeight - m.scrollTop - m.clientHeight; });
  assert.ok(at < 30, 'opened at the end: ' + at + ' px above it');
  await page.click('#conversation-list li[data-id="long1"] .rename');
  await page.fill('.rename-input', 'Long renamed');
  await page.press('.rename-input', 'Enter');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Long renamed');
  await page.click('#conversation-list li[data-id="long1"] .delete');
  await page.waitForFunction(() => document.activeElement.id === 'toast-undo');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#conversation-list li[data-id="long1"]');
  await page.close();
});

test('two tabs on one conversation keep both their turns; export writes them to a file', async () => {
  const a = await openPage(browser.context, daemon.url + '/');
  const b = await openPage(browser.context, daemon.url + '/');
  await ready(a);
  await ready(b);
  await a.click('#new-conversation');
  await a.fill('#input', 'From tab A');
  await a.press('#input', 'Enter');
  await waitDone(a);
  const id = await a.evaluate(() => document.querySelector('#conversation-list [aria-current="true"]').closest('li').dataset.id);
  await b.waitForSelector('#conversation-list li[data-id="' + id + '"]');
  await b.click('#conversation-list li[data-id="' + id + '"] .open');
  await b.fill('#input', 'From tab B');
  await b.press('#input', 'Enter');
  await waitDone(b);
  // Tab A shows B's turn, and its own next turn follows it.
  await a.waitForSelector('.msg.user >> text=From tab B');
  await a.fill('#input', 'A again');
  await a.press('#input', 'Enter');
  await waitDone(a);
  await b.reload();
  await ready(b);
  const stored = (await storedConversations(b)).find((c) => c.id === id);
  assert.deepEqual(stored.messages.filter((m) => m.role === 'user').map((m) => m.content), ['From tab A', 'From tab B', 'A again']);

  // Export: one JSON file with the conversation.
  const [download] = await Promise.all([b.waitForEvent('download'), b.click('#export-conversations')]);
  const doc = JSON.parse(await (await import('node:fs/promises')).readFile(await download.path(), 'utf8'));
  assert.equal(doc.format, 'k3serve-conversations');
  assert.ok(doc.conversations.some((c) => c.id === id));

  await a.close();
  await b.close();

});
