// axe-core (npm, pinned in package.json) run in a page of the web UI tests: the rule sets the UI
// is held to (WCAG 2.0-2.2 A and AA, and axe's best practices), the violations counted by impact
// and the serious and critical ones described.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'];
// The rules of those whose outcome depends on the colours (the theme changes nothing else: its
// CSS custom properties are colours), for a state already checked in full in another theme.
export const COLOUR_RULES = ['color-contrast', 'link-in-text-block'];

// Resolves with {counts: {minor, moderate, serious, critical}, serious: ["rule (impact) help: nodes"]}.
// With {colours: true} only COLOUR_RULES run. Only violations are collected (axe then skips
// describing every passing node, most of its time on a long page).
export async function axeCheck(page, { colours = false } = {}) {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE);
  const runOnly = colours ? { type: 'rule', values: COLOUR_RULES } : { type: 'tag', values: TAGS };
  const result = await page.evaluate((runOnly) => window.axe.run(document, { runOnly, resultTypes: ['violations'] }), runOnly);
  const counts = { minor: 0, moderate: 0, serious: 0, critical: 0 };
  const serious = [];
  for (const v of result.violations) {
    counts[v.impact] += v.nodes.length;
    if (v.impact === 'serious' || v.impact === 'critical')
      serious.push(`${v.id} (${v.impact}) ${v.help}: ${v.nodes.slice(0, 3).map((n) => n.target.join(' ') + ' ' + (n.failureSummary || '').replace(/\s+/g, ' ')).join(' | ')}`);
  }
  return { counts, serious };
}
