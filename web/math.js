// Math in model output: TeX between $…$ or \(…\) (inline) and $$…$$ or \[…\] (display), set by
// KaTeX (Debian's libjs-katex, embedded as vendor/katex.min.js and loaded with the first formula).
// Marked only marks a formula (<span class="math" data-tex="…">); it is typeset after DOMPurify
// has cleaned the page's HTML, from the TeX text, so nothing of the model's passes through
// KaTeX's output unescaped. KaTeX writes MathML (output: 'mathml'), which Chromium and Firefox
// draw natively: its HTML output positions glyphs with inline style attributes, which the page's
// Content-Security-Policy (style-src 'self') refuses. The fonts are KaTeX's (fonts-katex, under
// vendor/katex-fonts/, style.css). A formula KaTeX cannot parse is shown as its TeX source.
//
// A $ opens inline math only when a non-space follows it, and closes it only after a non-space
// and before a non-digit, so "it costs $5 and $10" stays text (the rule pandoc uses); inline math
// holds no line break and no backtick (a code span after a price is not read as math).

const DISPLAY = [/^\$\$([\s\S]+?)\$\$/, /^\\\[([\s\S]+?)\\\]/];
const INLINE = [/^\$(?=[^\s$])((?:\\.|[^$\\\n`])+?)(?<=\S)\$(?!\d)/, /^\\\(([\s\S]+?)\\\)/];

const escapeAttr = (s) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

// The marked extension (marked.use({extensions: [mathExtension]})).
export const mathExtension = {
  name: 'math',
  level: 'inline',
  start(src) {
    const i = src.search(/\$|\\[[(]/);
    return i < 0 ? undefined : i;
  },
  tokenizer(src) {
    for (const [rules, display] of [[DISPLAY, true], [INLINE, false]]) {
      for (const rule of rules) {
        const m = rule.exec(src);
        if (m && m[1].trim()) return { type: 'math', raw: m[0], text: m[1].trim(), display };
      }
    }
    return undefined;
  },
  renderer(token) {
    return '<span class="math' + (token.display ? ' display' : '') + '" data-tex="' + escapeAttr(token.text) + '"></span>';
  },
};

let katexLoading = null;   // a promise of window.katex once asked for
function loadKatex() {
  if (!katexLoading) {
    katexLoading = new Promise((resolve) => {
      const s = document.createElement('script');
      s.src = 'vendor/katex.min.js';
      s.onload = () => resolve(window.katex || null);
      s.onerror = () => resolve(null);
      document.head.append(s);
    });
  }
  return katexLoading;
}

function typesetOne(katex, el) {
  const tex = el.dataset.tex;
  const display = el.classList.contains('display');
  try {
    el.innerHTML = katex.renderToString(tex, { displayMode: display, output: 'mathml', throwOnError: true, trust: false });
    el.dataset.typeset = 'true';
  } catch {
    // Not TeX KaTeX knows: the source, as the model wrote it.
    el.textContent = display ? '$$' + tex + '$$' : '$' + tex + '$';
    el.classList.add('math-error');
    el.dataset.typeset = 'failed';
  }
}

// Typesets the formulas under `root` (loading KaTeX the first time).
export function typesetMath(root) {
  const pending = [...root.querySelectorAll('.math[data-tex]:not([data-typeset])')];
  if (!pending.length) return;
  if (window.katex) { for (const el of pending) typesetOne(window.katex, el); return; }
  for (const el of pending) el.textContent = el.dataset.tex;   // readable until KaTeX is there
  loadKatex().then((katex) => {
    if (katex) for (const el of pending) if (el.isConnected && !el.dataset.typeset) typesetOne(katex, el);
  });
}
