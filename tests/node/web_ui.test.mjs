// The embedded web UI in a real headless browser (Debian's Chromium driven by playwright-core):
// it loads, reaches "ready", streams an answer into the page, and the Stop button cancels the
// request on the server (visible in /metrics).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startDaemon } from './daemon.mjs';

let daemon, browser, profile;

before(async () => {
  daemon = await startDaemon('fake', ['--token-delay-ms', '20']);
  profile = mkdtempSync(path.join(os.tmpdir(), 'k3serve-chromium-'));
  // A fresh profile directory (playwright passes it as --user-data-dir).
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  await browser?.close();
  rmSync(profile, { recursive: true, force: true });
  assert.equal(await daemon.stop(), 0);
});

test('the UI streams an answer into the page', async () => {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(daemon.url + '/');
  await page.waitForSelector('#status.ready', { timeout: 10000 });
  assert.match(await page.textContent('#status'), /ready · fake/);
  // Greedy, so the fake engine's scripted answer comes out exactly.
  await page.evaluate(() => { document.querySelector('#temperature').value = '0'; });
  await page.fill('#input', 'Hello?');
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => {
    const m = document.querySelectorAll('.msg.assistant .content');
    return m.length === 1 && m[0].textContent === 'Hello from the fake engine!';
  }, null, { timeout: 15000 });
  assert.equal(await page.textContent('.msg.user .content'), 'Hello?');
  await page.waitForFunction(() => /tokens in/.test(document.querySelector('#stats').textContent));
  assert.equal(await page.isDisabled('#stop'), true);
  // The second turn sends the whole conversation and reuses the first turn's state.
  await page.fill('#input', 'Again');
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant .content').length === 2 &&
    document.querySelectorAll('.msg.assistant .content')[1].textContent === 'Hello from the fake engine!');
  await page.waitForFunction(() => /\([1-9][0-9]* reused\)/.test(document.querySelector('#stats').textContent));
  assert.deepEqual(errors, []);
  await page.close();
});

test('Stop cancels the request on the server', async () => {
  const slow = await startDaemon('fake', ['--token-delay-ms', '300', '--answer', 'x'.repeat(200)]);
  const page = await browser.newPage();
  try {
    await page.goto(slow.url + '/');
    await page.waitForSelector('#status.ready');
    await page.fill('#input', 'Write a lot');
    await page.click('#send');
    await page.waitForFunction(() => (document.querySelector('.msg.assistant .content')?.textContent ?? '').length >= 2,
      null, { timeout: 15000 });
    await page.click('#stop');
    await page.waitForFunction(() => /\[stopped\]/.test(document.querySelector('.msg.assistant .content').textContent));
    let cancelled = false;
    for (let i = 0; i < 100 && !cancelled; i++) {
      const m = await (await fetch(slow.url + '/metrics')).text();
      cancelled = m.includes('k3serve:requests_total{outcome="cancelled"} 1');
      if (!cancelled) await new Promise((res) => setTimeout(res, 50));
    }
    assert.ok(cancelled, 'the server counted the cancelled request');
    assert.equal(await page.isDisabled('#send'), false);
  } finally {
    await page.close();
    await slow.stop();
  }
});
