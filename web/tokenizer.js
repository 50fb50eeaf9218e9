// The tokenizer view: text in, the model's tokens out (POST /tokenize with pieces), one box per
// token with its id, so token boundaries are visible. Whitespace is drawn (· for a space,
// ↵ for a newline, → for a tab) so that tokens made of it can be seen.
import { request } from './api.js';

const $ = (id) => document.getElementById(id);
let timer = null;
let generation = 0;

function visible(piece) {
  return piece.replace(/ /g, '·').replace(/\n/g, '↵').replace(/\t/g, '→');
}

async function tokenize() {
  const text = $('tokenizer-input').value;
  const mine = ++generation;
  const list = $('tokenizer-output');
  if (!text) {
    list.textContent = '';
    $('tokenizer-count').textContent = '';
    return;
  }
  try {
    const r = await request('/tokenize', { content: text, with_pieces: true, parse_special: $('tokenizer-special').checked });
    if (mine !== generation) return;  // a newer edit already asked
    list.textContent = '';
    for (const t of r.tokens) {
      const li = document.createElement('li');
      li.className = 'token';
      li.dataset.id = String(t.id);
      const piece = document.createElement('span');
      piece.className = 'piece';
      piece.textContent = visible(t.piece);
      const id = document.createElement('span');
      id.className = 'id';
      id.textContent = String(t.id);
      li.append(piece, id);
      li.title = 'token ' + t.id + ': ' + JSON.stringify(t.piece);
      list.append(li);
    }
    $('tokenizer-count').textContent = r.count + ' tokens, ' + new TextEncoder().encode(text).length + ' bytes';
  } catch (e) {
    if (mine === generation) $('tokenizer-count').textContent = 'Error: ' + e.message;
  }
}

export function initTokenizer() {
  $('tokenizer-input').addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(tokenize, 250);
  });
  $('tokenizer-special').addEventListener('change', tokenize);
}
