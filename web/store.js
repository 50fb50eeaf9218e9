// What the browser keeps between visits. Small things (generation parameters, display switches,
// the API key, which conversation is open) in localStorage; conversations in IndexedDB, which
// holds far more than localStorage's few megabytes. A save that fails is reported (onSaveError)
// instead of dropped, and every change is sent to the page's other tabs (BroadcastChannel) and
// merged there, message by message, so two tabs never overwrite each other's turns. Nothing of
// this is sent anywhere but to the daemon.
import { mergeConversations, fromMessages } from './tree.js';
export { newId } from './tree.js';

const KEYS = {
  legacyConversations: 'k3serve.conversations',   // the first UI kept conversations here
  current: 'k3serve.current',
  params: 'k3serve.params',
  display: 'k3serve.display',
  apiKey: 'k3serve-api-key',   // the name the first UI used, so a saved key survives the upgrade
};

function load(key, fallback) {
  try {
    const v = localStorage.getItem(key);
    return v === null ? fallback : JSON.parse(v);
  } catch {
    return fallback;
  }
}
function save(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch { /* storage full or disabled: small settings only, the page still works */ }
}

// Generation parameters. `null` means "not sent: the server's default" (from /props), so the UI
// never sends a temperature of its own that the server's defaults would contradict.
export const DEFAULT_PARAMS = {
  max_tokens: null, temperature: null, top_p: null, top_k: 0, min_p: 0, seed: null, stop: [], thinking: 'none',
  presence_penalty: 0, frequency_penalty: 0, logit_bias: null, response_format: 'text', json_schema: '',
};

// Display switches: follow the newest text while it streams, show the reasoning while it
// streams (else folded), and the theme (system, light or dark).
export const DEFAULT_DISPLAY = { autoScroll: true, reasoningOpen: false, theme: 'system' };

export const settings = {
  apiKey: () => localStorage.getItem(KEYS.apiKey) || '',
  setApiKey: (k) => localStorage.setItem(KEYS.apiKey, k),
  params: () => ({ ...DEFAULT_PARAMS, ...load(KEYS.params, {}) }),
  setParams: (p) => save(KEYS.params, p),
  display: () => ({ ...DEFAULT_DISPLAY, ...load(KEYS.display, {}) }),
  setDisplay: (d) => save(KEYS.display, d),
};

// --- conversations ----------------------------------------------------------------------------

const DB_NAME = 'k3serve';
const STORE = 'conversations';
const cache = new Map();         // id -> conversation, the page's view of the database
let db = null;
let channel = null;
let hooks = { onSaveError() {}, onSaved() {}, onExternalChange() {} };
let failing = false;             // the last save failed: the warning is up

function openDb() {
  return new Promise((resolve, reject) => {
    const r = indexedDB.open(DB_NAME, 1);
    r.onupgradeneeded = () => r.result.createObjectStore(STORE, { keyPath: 'id' });
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

function readAll() {
  return new Promise((resolve, reject) => {
    const r = db.transaction(STORE).objectStore(STORE).getAll();
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

// Writes one conversation merged with what the database holds (one readwrite transaction, so a
// save from another tab in between is kept, not overwritten). Resolves with the merged record.
function write(c) {
  return new Promise((resolve, reject) => {
    let merged = c;
    let tx;
    try {
      tx = db.transaction(STORE, 'readwrite');
      const store = tx.objectStore(STORE);
      const get = store.get(c.id);
      get.onsuccess = () => {
        try {
          merged = get.result ? mergeConversations(c, get.result) : c;
          store.put(merged);
        } catch (e) { reject(e); tx.abort(); }
      };
    } catch (e) { reject(e); return; }
    tx.oncomplete = () => resolve(merged);
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error || new Error('the save was aborted'));
  });
}

function removeFromDb(id) {
  return new Promise((resolve, reject) => {
    const tx = db.transaction(STORE, 'readwrite');
    tx.objectStore(STORE).delete(id);
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
  });
}

function saveFailed(e) {
  failing = true;
  hooks.onSaveError(e && e.name === 'QuotaExceededError'
    ? 'the browser\'s storage for this site is full' : (e && e.message) || String(e));
}

function saved() {
  if (!failing) return;
  failing = false;
  hooks.onSaved();
}

function onMessage(event) {
  const msg = event.data || {};
  if (msg.type === 'put' && msg.conversation) {
    // Merged in place: the page's views and a running answer keep the same objects.
    const mine = cache.get(msg.conversation.id);
    if (mine) Object.assign(mine, mergeConversations(mine, msg.conversation));
    else cache.set(msg.conversation.id, msg.conversation);
    hooks.onExternalChange(msg.conversation.id);
  } else if (msg.type === 'remove') {
    cache.delete(msg.id);
    hooks.onExternalChange(msg.id);
  }
}

// Opens the database (moving the first UI's localStorage conversations into it once) and reads
// every conversation. Without IndexedDB (some private modes) conversations live in the page
// only, and onSaveError says so.
export async function openStore(h) {
  hooks = { ...hooks, ...h };
  try {
    db = await openDb();
    for (const c of await readAll()) cache.set(c.id, c);
    const legacy = load(KEYS.legacyConversations, null);
    if (Array.isArray(legacy)) {
      for (const old of legacy) if (!cache.has(old.id)) cache.set(old.id, await write(fromMessages(old)));
      localStorage.removeItem(KEYS.legacyConversations);
    }
  } catch (e) {
    db = null;
    saveFailed(new Error('this browser does not let the page store conversations (' + ((e && e.message) || e) + ')'));
  }
  if ('BroadcastChannel' in window) {
    channel = new BroadcastChannel('k3serve.conversations');
    channel.onmessage = onMessage;
  }
}

export const conversations = {
  // Newest first.
  all: () => [...cache.values()].sort((a, b) => b.updated - a.updated),
  get: (id) => cache.get(id) || null,
  currentId: () => load(KEYS.current, null),
  setCurrent: (id) => save(KEYS.current, id),
  // Keeps `c` (its `updated` is set now); resolves true once it is in the database.
  async put(c) {
    c.updated = Date.now();
    cache.set(c.id, c);
    if (channel) channel.postMessage({ type: 'put', conversation: c });
    if (!db) { saveFailed(new Error('conversations cannot be stored in this browser')); return false; }
    try {
      const merged = await write(c);
      if (merged !== c) Object.assign(c, merged);  // another tab's messages, now ours too
      saved();
      return true;
    } catch (e) {
      saveFailed(e);
      return false;
    }
  },
  async remove(id) {
    const removed = cache.get(id);
    if (!removed) return null;
    cache.delete(id);
    if (channel) channel.postMessage({ type: 'remove', id });
    if (db) await removeFromDb(id).catch(saveFailed);
    return removed;
  },
  async restore(c) {
    return this.put(c);
  },
  // Every conversation as one JSON document (what Export downloads).
  exportJson() {
    return JSON.stringify({ format: 'k3serve-conversations', version: 1, exported: new Date().toISOString(),
      conversations: this.all() }, null, 1);
  },
  // Merges an exported document in (a conversation already here keeps its messages and gains the
  // file's). Resolves with how many conversations were read; throws Error naming what is wrong.
  async importJson(text) {
    let doc;
    try { doc = JSON.parse(text); } catch { throw new Error('the file is not JSON'); }
    const list = Array.isArray(doc) ? doc : doc && doc.conversations;
    if (!Array.isArray(list)) throw new Error('the file has no "conversations" list');
    let n = 0;
    for (const raw of list) {
      if (!raw || typeof raw.id !== 'string') throw new Error('a conversation without an "id"');
      const c = raw.nodes ? raw : fromMessages(raw);
      const mine = cache.get(c.id);
      if (mine) Object.assign(mine, mergeConversations(mine, c));
      await this.put(mine || c);
      n++;
    }
    return n;
  },
};
