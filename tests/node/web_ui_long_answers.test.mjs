// The chat with answers that take minutes, in a real headless browser against
// k3serve_fake_daemon (the real HTTP layer and worker over a scripted engine with a delay per
// token). One case per defect the chat had in that regime, numbered as they were reported, so
// that tests/node/web_ui_against.sh can show each one failing on the web/ of before the fix:
//   1 a message typed while an answer streams is kept; 2 the newest text, and the finished answer's
//   stats and actions, are not under the message box; 3 a reader who scrolls back stays there and keeps a selection; 4
//   switching conversations does not cancel an answer; 5 the chart keeps its size with the drawer
//   closed; 6 screen readers hear an answer once; 7 a save that fails is shown, two tabs keep
//   both their turns, export; 8 code without a language is not auto-detected; 9 a failed answer
//   is not all red, figures say they are stale while disconnected.
// The rest of what was seen is in web_ui_also_seen.test.mjs. Every wait is on a state, never on
// a time; waits and reads use what the UI before the fix had too (#stop, .msg, .content), so an
// old UI fails on the assertion, not on a missing element.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
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
async function waitLonger(page, than) {
  await page.waitForFunction((n) => ([...document.querySelectorAll('.msg.assistant .content')].pop()?.textContent ?? '').length > n, than, { timeout: 20000 });
}
// Done: Stop is off again and the last answer has text.
async function waitDone(page) {
  await page.waitForFunction(() => document.querySelector('#stop').disabled
    && ([...document.querySelectorAll('.msg.assistant .content')].pop()?.textContent ?? '').length > 0
    && ![...document.querySelectorAll('.msg.assistant')].pop().hasAttribute('aria-busy'), null, { timeout: 30000 });
}
async function send(page, text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}

test('while one answer streams', async (t) => {
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
  await send(page, 'Write many paragraphs');
  await waitLonger(page, 400);

  await t.test('1. Enter while an answer streams keeps the typed message in the box', async () => {
    await send(page, 'My next question');
    assert.equal(await page.inputValue('#input'), 'My next question');
    assert.equal(sent.length, 1, 'the message typed while streaming was not sent');
    assert.match(await page.evaluate(() => document.querySelector('#composer-note')?.textContent ?? ''), /still being written/);
  });

  await t.test('3. a reader who scrolls back stays there, and a selection survives new text', async () => {
    // The messages scroll on their own (above the box), not the page.
    await page.waitForFunction(() => { const m = document.querySelector('#messages'); return m.scrollHeight > m.clientHeight + 50; }, null, { timeout: 20000 })
      .catch(() => assert.fail('the messages are not a scrolling box of their own'));
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
  });

  await t.test('6. screen readers hear the answer once, not every token', async () => {
    await waitDone(page);
    const live = await page.evaluate(() => window.__liveMutations);
    assert.ok(live <= 12, 'live-region mutations during the whole answer: ' + live);
    assert.match(await page.evaluate(() => document.querySelector('#announcer')?.textContent ?? ''), /^Answer: Paragraph 0/);
  });
  await page.close();
});

test('2. the newest text while it streams, then the stats and actions, are in view and never under the message box', async () => {
  // The reader never scrolls: the view follows the answer on its own.
  const page = await openPage(browser.context, daemon.url + '/');
  await page.setViewportSize({ width: 1100, height: 640 });
  await ready(page);
  await page.click('#new-conversation');
  await send(page, 'Write many paragraphs');
  const geometry = () => page.evaluate(() => {
    const last = [...document.querySelectorAll('.msg.assistant')].pop();
    const composer = document.querySelector('#composer').getBoundingClientRect();
    const bottom = (sel) => last.querySelector(sel).getBoundingClientRect().bottom;
    return { streaming: last.hasAttribute('aria-busy'), text: bottom('.content'), stats: bottom('.stats'),
      actions: bottom('.actions'), box: composer.top, view: innerHeight,
      // the messages are taller than the room above the box
      overflowing: document.querySelector('#messages').scrollHeight > composer.top };
  });
  // While it streams (once the answer is longer than the view): its newest line is above the box.
  const seen = [];
  for (const length of [700, 900, 1100]) {
    await waitLonger(page, length);
    const g = await geometry();
    if (g.streaming && g.overflowing) seen.push(g);
  }
  for (const g of seen) assert.ok(g.text <= g.box + 1, 'the newest text is under the message box: ' + JSON.stringify(g));
  await waitDone(page);
  const g = await geometry();
  assert.ok(g.overflowing, 'the answer is longer than the view: ' + JSON.stringify(g));
  assert.ok(g.text <= g.box + 1 && g.stats <= g.box + 1 && g.actions <= g.box + 1 && g.actions <= g.view, 'the end of the answer is under the box or below the fold: ' + JSON.stringify(g));
  assert.ok(await page.isVisible('.msg.assistant .actions .regenerate'));
  await screenshot(page, 'long-done');
  await page.close();
});

test('4. switching or starting a conversation does not cancel the running answer', async () => {
  const page = await openPage(browser.context, daemon.url + '/');
  await ready(page);
  await page.click('#new-conversation');
  const cancelled = await countCancelled(daemon.url);
  await send(page, 'Keep going');
  await waitLonger(page, 100);
  const id = await page.evaluate(() => document.querySelector('#conversation-list [aria-current="true"]').closest('li').dataset.id);
  await page.click('#new-conversation');
  assert.equal(await page.locator('#messages .msg').count(), 0);
  await page.click('#conversation-list li[data-id="' + id + '"] .open');
  await waitDone(page);
  assert.equal(await countCancelled(daemon.url), cancelled, 'nothing was cancelled');
  assert.equal((await answerText(page)).replace(/\s+/g, ' ').trim(), PARAGRAPHS.replace(/\s+/g, ' '));
  await page.close();
});

test('5. phone: the chart keeps its size while the figures drawer is closed', async () => {
  const page = await browser.context.newPage();
  await page.addInitScript(() => Object.defineProperty(window, 'devicePixelRatio', { get: () => 2 }));
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(daemon.url + '/');
  await ready(page);
  // Three status polls with the drawer closed (each poll draws the chart).
  for (let i = 0; i < 3; i++) {
    await page.waitForResponse((r) => r.url().includes('/v1/status'), { timeout: 10000 });
    await page.evaluate(() => new Promise((res) => requestAnimationFrame(() => requestAnimationFrame(res))));
  }
  const width = await page.evaluate(() => document.querySelector('#chart').width);
  assert.ok(width <= 2 * 400, 'canvas width ' + width);
  await page.click('#toggle-figures');
  await page.waitForFunction(() => document.querySelector('#chart').width === Math.round(document.querySelector('#chart').clientWidth * 2));
  await page.close();
});

test('7. conversations are not lost', async (t) => {
  // Short answers at once: what is checked is what is kept, not how it streams.
  const quick = await startDaemon('fake', ['--answer', 'Noted.']);
  t.after(() => quick.stop());
  await t.test('a save that fails (storage full) shows a warning with Export, gone once a save works', async () => {
    const page = await browser.context.newPage();
    // The browser's storage for the site is full: IndexedDB writes and the conversations' key in
    // localStorage (where the first UI kept them) throw QuotaExceededError.
    await page.addInitScript(() => {
      const full = () => { throw new DOMException('The quota has been exceeded.', 'QuotaExceededError'); };
      const put = IDBObjectStore.prototype.put;
      IDBObjectStore.prototype.put = function (...a) { if (window.__full) full(); return put.apply(this, a); };
      const setItem = Storage.prototype.setItem;
      Storage.prototype.setItem = function (k, v) { if (window.__full && k === 'k3serve.conversations') full(); return setItem.call(this, k, v); };
    });
    await page.goto(quick.url + '/');
    await ready(page);
    await page.click('#new-conversation');
    await page.evaluate(() => { window.__full = true; });
    await send(page, 'Will this be kept?');
    await page.waitForFunction(() => [...document.querySelectorAll('[role="alert"]')].some((e) => e.offsetParent && /not saved/i.test(e.textContent)), null, { timeout: 10000 })
      .catch(() => assert.fail('no visible warning that the conversation was not saved'));
    assert.match(await page.textContent('#save-warning'), /storage for this site is full/);
    assert.ok(await page.isVisible('#save-warning-export'));
    await waitDone(page);
    await page.evaluate(() => { window.__full = false; });
    await send(page, 'And now?');
    await page.waitForSelector('#save-warning', { state: 'hidden' });
    await waitDone(page);
    await page.close();
  });

  await t.test('two tabs on one conversation keep both their turns', async () => {
    const a = await openPage(browser.context, quick.url + '/');
    const b = await openPage(browser.context, quick.url + '/');
    await ready(a);
    await ready(b);
    await a.click('#new-conversation');
    await send(a, 'From tab A');
    await waitDone(a);
    const id = await a.evaluate(() => document.querySelector('#conversation-list [aria-current="true"]').closest('li').dataset.id);
    await b.reload();
    await ready(b);
    await b.click('#conversation-list li[data-id="' + id + '"] .open');
    await send(b, 'From tab B');
    await waitDone(b);
    // Tab A shows B's turn without a reload, and its own next turn follows it.
    await a.waitForSelector('.msg.user >> text=From tab B', { timeout: 10000 });
    await send(a, 'A again');
    await waitDone(a);
    await b.reload();
    await ready(b);
    const stored = (await storedConversations(b)).find((c) => c.id === id);
    assert.deepEqual(stored.messages.filter((m) => m.role === 'user').map((m) => m.content), ['From tab A', 'From tab B', 'A again']);
    await a.close();
    await b.close();
  });

  await t.test('Export writes every conversation to a JSON file', async () => {
    const page = await openPage(browser.context, quick.url + '/');
    await ready(page);
    const ids = (await storedConversations(page)).map((c) => c.id);
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: 10000 }), page.click('#export-conversations', { timeout: 5000 })]);
    const doc = JSON.parse(await readFile(await download.path(), 'utf8'));
    assert.equal(doc.format, 'k3serve-conversations');
    assert.deepEqual(doc.conversations.map((c) => c.id).sort(), ids.sort());
    await page.close();
  });
});

test('8. a code block without a language is not auto-detected', async () => {
  const code = await startDaemon('fake', ['--answer', 'Code:\n\n```\nfor x in y: print(x)\n```\n\n```python\ndef f():\n    return 1\n```']);
  const page = await openPage(browser.context, code.url + '/');
  try {
    // Counted from the moment highlight.js exists, whenever it is loaded.
    await page.addInitScript(() => {
      window.__auto = 0;
      let lib;
      Object.defineProperty(window, 'hljs', { configurable: true, get: () => lib, set: (v) => {
        lib = v;
        const orig = v.highlightAuto;
        v.highlightAuto = (...a) => { window.__auto++; return orig.apply(v, a); };
      } });
    });
    await page.reload();
    await ready(page);
    await send(page, 'Show code');
    await waitDone(page);
    await page.waitForSelector('.msg.assistant pre code.language-python .hljs-keyword');
    assert.equal(await page.evaluate(() => window.__auto), 0, 'highlightAuto calls');
    assert.equal(await page.locator('.msg.assistant pre code:not([class*="language-"]) span').count(), 0, 'no auto-detected highlighting');
    await screenshot(page, 'code-blocks');
  } finally {
    await page.close();
    await code.stop();
  }
});

test('9. failures and a lost daemon', async (t) => {
  const other = await startDaemon('fake', ['--answer', 'Fine.']);
  const page = await openPage(browser.context, other.url + '/');
  await t.test('a failed answer is not all red', async () => {
    await ready(page, false);
    // min_p 5 is refused by the server (400): the answer fails.
    await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ min_p: 5 })));
    await send(page, 'Hello?');
    await page.waitForSelector('.msg.assistant [role="alert"]');
    const colors = await page.evaluate(() => ({
      who: getComputedStyle(document.querySelector('.msg.assistant .who')).color,
      muted: getComputedStyle(document.querySelector('.msg.user .who')).color,
      content: getComputedStyle(document.querySelector('.msg.assistant .content')).color,
      body: getComputedStyle(document.body).color,
    }));
    assert.equal(colors.who, colors.muted, 'the failed answer\'s labels keep their colour');
    assert.equal(colors.content, colors.body, 'the failed answer\'s text keeps its colour');
  });
  await t.test('the figures say they are stale while the daemon is away', async () => {
    await other.stop();
    await page.waitForFunction(() => /disconnected/.test(document.querySelector('#connection').textContent), null, { timeout: 15000 });
    await page.waitForFunction(() => /not updated since/i.test(document.querySelector('#figures')?.textContent ?? ''), null, { timeout: 15000 })
      .catch(() => assert.fail('the figures do not say they are stale'));
    assert.equal(await page.getAttribute('#figures', 'data-stale'), 'true');
  });
  await page.close();
});
