// A headless Debian Chromium (playwright-core) for the web UI tests, and where their screenshots
// go: $K3_TEST_ARTIFACTS/ui/NAME.png (build/test-artifacts/ui/ under ctest).
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

export const artifacts = path.join(process.env.K3_TEST_ARTIFACTS ?? path.join(os.tmpdir(), 'k3serve-artifacts'), 'ui');

// Resolves with {context, close()}: one persistent profile (so localStorage survives reloads).
export async function launchBrowser(options = {}) {
  mkdirSync(artifacts, { recursive: true });
  const profile = mkdtempSync(path.join(os.tmpdir(), 'k3serve-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    ...options,
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

// A new page that records uncaught errors, CSP violations and console errors in page.problems.
export async function openPage(context, url) {
  const page = await context.newPage();
  page.problems = [];
  page.on('pageerror', (e) => page.problems.push('pageerror: ' + e.message));
  page.on('console', (m) => { if (m.type() === 'error') page.problems.push('console: ' + m.text()); });
  if (url) await page.goto(url);
  return page;
}

export async function screenshot(page, name) {
  await page.screenshot({ path: path.join(artifacts, name + '.png'), fullPage: false });
}

// The conversations the page keeps (IndexedDB "k3serve", docs/web-ui.md), each with its branch
// on screen as `messages` (first to last).
export async function storedConversations(page) {
  return page.evaluate(() => new Promise((resolve, reject) => {
    const open = indexedDB.open('k3serve', 1);
    open.onerror = () => reject(open.error);
    open.onsuccess = () => {
      if (!open.result.objectStoreNames.contains('conversations')) return resolve([]);  // a page that never stored one
      const r = open.result.transaction('conversations').objectStore('conversations').getAll();
      r.onerror = () => reject(r.error);
      r.onsuccess = () => resolve(r.result.sort((a, b) => b.updated - a.updated).map((c) => {
        const messages = [];
        for (let n = c.nodes[c.leaf]; n && !n.deleted; n = c.nodes[n.parent]) messages.unshift(n);
        return { ...c, messages };
      }));
    };
  }));
}
