// During a long prefill the chat says how far the prompt is read: the real `k3serve serve` on the
// tiny model, its prompt read in small chunks (--prefill-mb 0.25) and held between two chunks by
// the worker's test hook (--test-hold-prefill, docs/development.md) while the test looks. The
// figures panel (labelled as this page's request) and the waiting answer show "N of M tokens"
// from /v1/status active[].prefill, the time left is the server's eta_s, and the progress goes
// away once the answer is written.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { axeCheck } from './axe_check.mjs';
import { startDaemon } from './daemon.mjs';
import { launchBrowser, openPage, screenshot } from './browser.mjs';

let browser, daemon;
const dir = mkdtempSync(path.join(os.tmpdir(), 'k3-prefill-'));
const hold = path.join(dir, 'hold');
before(async () => {
  browser = await launchBrowser();
  writeFileSync(hold, '');
  daemon = await startDaemon('tiny', ['--prefill-mb', '0.25', '--test-hold-prefill', hold]);
});
after(async () => {
  await browser?.close();
  await daemon?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('a long prompt: tokens read of the total, the rate and the server\'s expected finish, then the answer', async () => {
  const page = await openPage(browser.context, daemon.url + '/');
  // The daemon's own /v1/status, with one change the test can recognise: eta_s is 754 s, which
  // the page could not work out from the other figures (it must show the server's, not its own).
  let patched = false;
  await page.route('**/v1/status*', async (route) => {
    const response = await route.fetch();
    const status = await response.json();
    const p = status.active?.[0]?.prefill;
    if (p && p.eta_s !== null && p.done_tokens < p.total_tokens) { p.eta_s = 754; patched = true; }
    await route.fulfill({ response, json: status });
  });
  await page.waitForSelector('#connection[data-state="ready"]', { timeout: 30000 });
  await page.evaluate(() => localStorage.setItem('k3serve.params', JSON.stringify({ temperature: 0, max_tokens: 2 })));
  const prompt = Array.from({ length: 64 }, (_, i) => 'word' + (i % 10)).join(' ');
  await page.fill('#input', prompt);
  await page.press('#input', 'Enter');
  // Held after the first chunk (chunks_done 1): part of the prompt is read, and the count stays.
  let held = null;
  while (!held) {
    const status = await (await fetch(daemon.url + '/v1/status')).json();
    const p = status.active?.[0]?.prefill;
    if (p && p.chunks_done >= 1) held = { id: status.active[0].id, ...p };
    else await new Promise((r) => setTimeout(r, 50));  // (polling the state, not waiting a time)
  }
  const [done, total] = [held.done_tokens, held.total_tokens];
  assert.ok(done > 0 && done < total && total >= 200, JSON.stringify(held));
  const count = (n) => n.toLocaleString('en');
  const shown = `Reading the prompt: ${count(done)} of ${count(total)} tokens, `;
  await page.waitForFunction((start) => {
    const t = document.querySelector('#prefill-text').textContent;
    return t.startsWith(start) && / left/.test(t);
  }, shown, { timeout: 30000 }).catch(async () => assert.fail('the progress shown: ' + await page.textContent('#prefill-text')));
  const text = await page.textContent('#prefill-text');
  assert.match(text, /^Reading the prompt: [\d,]+ of [\d,]+ tokens, [\d.,]+ tokens\/s, about 12 min 34 s left \(until \d\d:\d\d/);
  assert.ok(patched);
  assert.equal(await page.evaluate(() => document.querySelector('#prefill-bar').max), total);
  assert.equal(await page.evaluate(() => document.querySelector('#prefill-bar').value), done);
  // The context meter counts the sent message as the server's /tokenize does (the count made
  // while it was written, kept with the message), not by a guess from its length (a third of it).
  const meter = Number((/([\d,]+) of [\d,]+ context tokens/.exec(await page.textContent('#context-meter')) || [])[1]?.replace(/,/g, ''));
  const tokenized = (await (await fetch(daemon.url + '/tokenize', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ content: prompt }) })).json()).count;
  assert.equal(meter, tokenized, 'the meter counts the sent message as /tokenize does');
  assert.ok(tokenized < total && tokenized > prompt.length / 3);
  // Whose request: the only one running, sent by this page.
  assert.equal(await page.textContent('#fig-whose'), 'Running request #' + held.id + ' (this page)');
  // The waiting answer says the same.
  await page.waitForFunction(() => /^reading the prompt: [\d,]+ of [\d,]+ tokens, .*about 12 min 34 s left/.test(document.querySelector('.msg.assistant .state')?.textContent ?? ''), null, { timeout: 10000 });
  await screenshot(page, 'prefill');
  // The state is accessible in both themes at both widths (axe-core, as in node_web_ui_axe).
  const serious = [];
  for (const [width, height, name] of [[1280, 800, 'desktop'], [390, 844, 'phone']]) {
    await page.setViewportSize({ width, height });
    if (name === 'phone') await page.click('#toggle-figures');
    for (const theme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: theme });
      for (const v of (await axeCheck(page, { colours: theme === 'dark' })).serious) serious.push(`prefill/${theme}/${name}: ${v}`);
      if (process.env.K3_UI_SCREENSHOTS) await screenshot(page, `prefill-${theme}-${name}`);
    }
  }
  assert.deepEqual(serious, []);
  await page.click('#toggle-figures');  // (not Esc: that would stop the answer)
  await page.setViewportSize({ width: 1280, height: 800 });
  rmSync(hold);
  await page.waitForFunction(() => document.querySelector('.msg.assistant')?.dataset.state === 'done', null, { timeout: 60000 });
  await page.waitForSelector('#prefill', { state: 'hidden', timeout: 10000 });
  assert.doesNotMatch(await page.textContent('.msg.assistant .state'), /reading the prompt/);
  assert.deepEqual(page.problems, []);
  await page.close();
});
