// Model output as safe HTML: Markdown by marked, highlighted code by highlight.js, and everything
// passed through DOMPurify before it touches the page, so a <script> or an onerror= in the
// model's text is shown or dropped, never run (the Content-Security-Policy forbids inline
// script as a second line of defence). The three libraries are Debian's packages, embedded into
// the daemon (vendor/*.js); without them the text is shown as plain text.
const { marked, DOMPurify, hljs } = window;

function highlight(code, lang) {
  if (!hljs) return null;
  try {
    if (lang && hljs.getLanguage(lang)) return hljs.highlight(lang, code, true).value;
    if (code.length < 4000) return hljs.highlightAuto(code).value;
  } catch { /* an unknown or broken grammar: plain code */ }
  return null;
}

if (DOMPurify) {
  // Links open in a new tab without handing this page to the target.
  DOMPurify.addHook('afterSanitizeAttributes', (node) => {
    if (node.tagName === 'A' && node.getAttribute('href')) {
      node.setAttribute('target', '_blank');
      node.setAttribute('rel', 'noopener noreferrer');
    }
  });
}

export const markdownAvailable = Boolean(marked && DOMPurify);

// Replaces the content of `element` with `text` rendered as Markdown.
export function renderMarkdown(element, text) {
  if (!markdownAvailable) {
    element.textContent = text;
    return;
  }
  const html = marked.parse(text, {
    gfm: true, breaks: false, mangle: false, headerIds: false, langPrefix: 'hljs language-', highlight,
  });
  element.innerHTML = DOMPurify.sanitize(html, { USE_PROFILES: { html: true } });
  for (const pre of element.querySelectorAll('pre')) addCopyButton(pre);
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
