// The message box's helpers: text and code files attached to the message (a long paste becomes
// one too, so the box stays usable), and the context meter: the tokens of what is being written
// (the server's /tokenize) next to the conversation's and the context's size, with a check
// before sending that the prompt fits the server's limit.
import { request } from './api.js';
import { limits } from './settings.js';

const $ = (id) => document.getElementById(id);
const PASTE_AS_FILE = 2000;        // characters: a longer paste becomes an attachment
const MAX_FILE_BYTES = 1 << 20;

let pending = [];                  // [{name, text}] attached to the message being written
let pasted = 0;
let conversationTokens = () => 0;  // the open conversation's prompt so far (from the chat view)
let messageTokens = 0;
let counted = '';                  // the text messageTokens was counted for
let countedExactly = false;        // by the server's /tokenize (else estimated)
let timer = null;
let generation = 0;

export function attachments() { return pending.slice(); }

export function clearComposer() {
  pending = [];
  drawChips();
  // At once, not after the typing pause: the sent message now counts in the conversation, and
  // for those 300 ms the meter counted it twice.
  clearTimeout(timer);
  count();
}

// What the model is sent for a user message: its text, then each attached file in a fence.
export function contentWithAttachments(text, files) {
  let out = text;
  for (const f of files || []) out += (out ? '\n\n' : '') + 'File ' + f.name + ':\n```\n' + f.text.replace(/\n?$/, '\n') + '```';
  return out;
}

function drawChips() {
  const list = $('pending-attachments');
  list.textContent = '';
  list.hidden = pending.length === 0;
  pending.forEach((f, i) => {
    const li = document.createElement('li');
    li.className = 'chip';
    li.append('📄 ' + f.name + ' (' + f.text.length + ' characters) ');
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'icon small';
    remove.textContent = '✕';
    remove.setAttribute('aria-label', 'Remove ' + f.name);
    remove.addEventListener('click', () => { pending.splice(i, 1); drawChips(); scheduleCount(); $('input').focus(); });
    li.append(remove);
    list.append(li);
  });
}

function note(text) {
  $('composer-note').textContent = text;
}

async function addFiles(files) {
  for (const file of files) {
    if (file.size > MAX_FILE_BYTES) { note(file.name + ' is larger than 1 MB: not attached.'); continue; }
    const text = await file.text();
    if (text.includes('\0')) { note(file.name + ' is not a text file: not attached (text and code files only).'); continue; }
    pending.push({ name: file.name, text });
  }
  drawChips();
  scheduleCount();
}

function scheduleCount() {
  clearTimeout(timer);
  timer = setTimeout(count, 300);
}

// Counts the tokens of the text and attachments being written, with /tokenize.
async function count() {
  const text = contentWithAttachments($('input').value, pending);
  const mine = ++generation;
  if (!text) { messageTokens = 0; counted = ''; drawMeter(); return; }
  try {
    const r = await request('/tokenize', { content: text });
    if (mine !== generation) return;
    messageTokens = r.count;
    counted = text;
    countedExactly = true;
  } catch {
    // Too long for /tokenize (it refuses more than a context), or the server is away.
    if (mine !== generation) return;
    messageTokens = Math.ceil(text.length / 3);
    counted = text;
    countedExactly = false;
  }
  drawMeter();
}

// The server's count of the text last counted ({text, count}), null when it is an estimate: kept
// with a sent message, so that the meter counts it exactly until the answer's usage says more.
export function exactCount() {
  return countedExactly && counted ? { text: counted, count: messageTokens } : null;
}

export function drawMeter() {
  const meter = $('context-meter');
  const ctx = limits().n_ctx;
  const conv = conversationTokens();
  const total = conv + messageTokens;
  meter.textContent = (messageTokens ? messageTokens + ' tokens in this message · ' : '') +
    (ctx ? total + ' of ' + ctx + ' context tokens' : total + ' tokens');
  const bar = $('context-bar');
  bar.hidden = !ctx;
  if (ctx) { bar.max = ctx; bar.value = Math.min(total, ctx); }
  meter.dataset.tokens = String(messageTokens);
  meter.classList.toggle('over', Boolean(limits().max_prompt_tokens && total > limits().max_prompt_tokens));
}

// Before sending: null when the prompt fits, else the reason it does not. Counts again when the
// text changed since the last count.
export async function checkFits(text, files) {
  const full = contentWithAttachments(text, files);
  if (full !== counted) { clearTimeout(timer); await count(); }
  const max = limits().max_prompt_tokens;
  const total = conversationTokens() + messageTokens;
  if (max && total > max) {
    return 'This message would make the prompt about ' + total + ' tokens, more than the server takes (' + max +
      '). Shorten it, remove an attachment or start a new conversation.';
  }
  return null;
}

export function initComposer({ tokensSoFar }) {
  conversationTokens = tokensSoFar;
  $('input').addEventListener('input', () => { note(''); scheduleCount(); });
  $('attach').addEventListener('click', () => $('attach-file').click());
  $('attach-file').addEventListener('change', async (e) => {
    await addFiles([...e.target.files]);
    e.target.value = '';
  });
  $('input').addEventListener('paste', (e) => {
    const text = e.clipboardData && e.clipboardData.getData('text/plain');
    if (text && text.length > PASTE_AS_FILE) {
      e.preventDefault();
      pending.push({ name: 'pasted text ' + (++pasted) + '.txt', text });
      drawChips();
      scheduleCount();
      note('The pasted text (' + text.length + ' characters) is attached as a file.');
    }
  });
  drawChips();
}

export { note as composerNote };
