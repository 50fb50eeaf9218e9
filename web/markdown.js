// Model output as safe HTML: Markdown by marked, everything passed through DOMPurify before it
// touches the page, so a <script>, an onerror=, a <form> or a <style> in the model's text is
// dropped, never run or applied (the Content-Security-Policy forbids inline script as a second
// line of defence). Math is typeset by math.js (KaTeX) after sanitising. The libraries are Debian's packages, embedded into the daemon (vendor/*.js);
// without them the text is shown as plain text.
//
// highlight.js (85% of the page's bytes) is not loaded with the page: the first code block with
// a language it knows loads it, and blocks are highlighted then. A block without a language is
// left plain: auto-detection tries every grammar and took up to 1.6 s per block.
//
// A streamed answer is rendered block by block (renderStreaming): text up to the last blank line
// outside a code fence is final, rendered once and appended; only the unfinished last block is
// rendered again as tokens arrive. So a reader can select text of the answer while it grows, and
// a frame costs the last paragraph, not the whole answer.
import { mathExtension, typesetMath } from './math.js';

const { marked, DOMPurify } = window;

export const markdownAvailable = Boolean(marked && DOMPurify);
if (marked) marked.use({ extensions: [mathExtension] });

// Tags model output never needs, which would let it draw controls or restyle the page.
const FORBID_TAGS = ['style', 'form', 'input', 'button', 'textarea', 'select', 'option', 'iframe', 'frame',
  'object', 'embed', 'dialog', 'template', 'link', 'meta', 'base', 'svg', 'math', 'audio', 'video'];
// `id` and `name` could clobber the page's own ids; `style` could hide or cover the page.
const FORBID_ATTR = ['style', 'id', 'name', 'autofocus', 'tabindex', 'accesskey', 'form'];

if (DOMPurify) {
  DOMPurify.addHook('afterSanitizeAttributes', (node) => {
    // Links open in a new tab without handing this page to the target; a link without text
    // is named by its address (screen readers need a name).
    if (node.tagName === 'A' && node.getAttribute('href')) {
      node.setAttribute('target', '_blank');
      node.setAttribute('rel', 'noopener noreferrer');
      if (!node.textContent.trim() && !node.querySelector('img')) node.setAttribute('aria-label', node.getAttribute('href'));
    }
    // Every image has a text alternative: the model's, else a plain one.
    if (node.tagName === 'IMG') {
      if (!(node.getAttribute('alt') || '').trim()) node.setAttribute('alt', 'image in the answer (no description)');
      node.setAttribute('loading', 'lazy');
    }
  });
}

function toHtml(text) {
  const html = marked.parse(text, { gfm: true, breaks: false, mangle: false, headerIds: false });
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS, FORBID_ATTR });
}

// --- highlight.js, loaded with the first code block ---------------------------------------------

let highlighter = null;   // a promise of window.hljs once asked for

function loadHighlighter() {
  if (!highlighter) {
    highlighter = new Promise((resolve) => {
      const s = document.createElement('script');
      s.src = 'vendor/highlight.min.js';
      s.onload = () => resolve(window.hljs || null);
      s.onerror = () => resolve(null);
      document.head.append(s);
    });
  }
  return highlighter;
}

function languageOf(code) {
  const m = /(?:^|\s)language-([\w+#.-]+)/.exec(code.className);
  return m ? m[1] : null;
}

function highlightNow(hljs, code) {
  const lang = languageOf(code);
  if (!lang || code.dataset.highlighted || !hljs.getLanguage(lang)) return;
  try {
    // Built from the block's text: highlight.js escapes it, so no HTML of the model's gets in.
    code.innerHTML = hljs.highlight(lang, code.textContent, true).value;
    code.classList.add('hljs');
    code.dataset.highlighted = 'true';
  } catch { /* a broken grammar: the block stays plain */ }
}

// Highlights the code blocks under `root` that name a language.
function highlightIn(root) {
  const blocks = [...root.querySelectorAll('pre code')].filter((c) => languageOf(c) && !c.dataset.highlighted);
  if (!blocks.length) return;
  loadHighlighter().then((hljs) => {
    if (hljs) for (const code of blocks) if (code.isConnected) highlightNow(hljs, code);
  });
}

// --- rendering ----------------------------------------------------------------------------------

function decorate(root, highlight) {
  for (const pre of root.querySelectorAll('pre')) if (!pre.classList.contains('has-copy')) addCopyButton(pre);
  typesetMath(root);
  if (highlight) highlightIn(root);
}

// Replaces the content of `element` with `text` rendered as Markdown.
export function renderMarkdown(element, text) {
  delete element.streaming;
  if (!markdownAvailable) {
    element.textContent = text;
    return;
  }
  element.innerHTML = toHtml(text);
  decorate(element, true);
}

// Where the finished part of a streamed text ends: after its last blank line outside a code
// fence (a block there cannot change any more).
export function stableEnd(text) {
  let inFence = false;
  let end = 0;
  let at = 0;
  for (const line of text.split('\n')) {
    const next = at + line.length + 1;
    if (/^\s{0,3}(```|~~~)/.test(line)) inFence = !inFence;
    else if (!inFence && line.trim() === '' && next <= text.length) end = next;
    at = next;
  }
  return end;
}

// Renders a growing `text` into `element`, appending finished blocks and redrawing only the
// last; `final` renders (and highlights) the last block for good.
export function renderStreaming(element, text, final) {
  if (!markdownAvailable) {
    if (element.textContent !== text) element.textContent = text;
    return;
  }
  let s = element.streaming;
  if (!s || !text.startsWith(s.text)) {
    element.textContent = '';
    s = element.streaming = { text: '', done: 0, tail: document.createElement('div') };
    s.tail.className = 'md-tail';
    element.append(s.tail);
  }
  const end = final ? text.length : stableEnd(text);
  if (end > s.done) {
    const block = document.createElement('div');
    block.className = 'md-block';
    block.innerHTML = toHtml(text.slice(s.done, end));
    decorate(block, true);
    element.insertBefore(block, s.tail);
    s.done = end;
  }
  const tail = text.slice(s.done);
  if (tail !== s.tailText) {
    s.tailText = tail;
    s.tail.innerHTML = tail ? toHtml(tail) : '';
    decorate(s.tail, false);
  }
  s.text = text;
  if (final) delete element.streaming;
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // Clipboard API refused (plain http on another host, or no permission): the old way.
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.className = 'offscreen';
    document.body.append(area);
    area.select();
    const ok = document.execCommand('copy');
    area.remove();
    return ok;
  }
}

function addCopyButton(pre) {
  const code = pre.querySelector('code');
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'copy';
  button.textContent = 'Copy';
  button.setAttribute('aria-label', 'Copy code');
  button.addEventListener('click', async () => {
    const ok = await copyText((code || pre).textContent);
    button.textContent = ok ? 'Copied' : 'Copy failed';
    setTimeout(() => { button.textContent = 'Copy'; }, 1500);
  });
  pre.classList.add('has-copy');
  pre.prepend(button);
}

export { copyText };
