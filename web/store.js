// What the browser keeps between visits (localStorage): the conversations, which one is open,
// the generation parameters and the API key. Nothing of this is sent anywhere but to the daemon.
const KEYS = {
  conversations: 'k3serve.conversations',
  current: 'k3serve.current',
  params: 'k3serve.params',
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
  } catch { /* storage full or disabled: the page still works, without memory */ }
}

// Generation parameters. `null` means "not sent: the server's default".
export const DEFAULT_PARAMS = {
  max_tokens: null, temperature: 0.7, top_p: 1, top_k: 0, min_p: 0, seed: null, stop: [], thinking: 'none',
};

export const settings = {
  apiKey: () => localStorage.getItem(KEYS.apiKey) || '',
  setApiKey: (k) => localStorage.setItem(KEYS.apiKey, k),
  params: () => ({ ...DEFAULT_PARAMS, ...load(KEYS.params, {}) }),
  setParams: (p) => save(KEYS.params, p),
};

// A conversation: {id, title, system, messages: [{role, content, reasoning?, stats?}], updated}.
function newId() {
  return Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
}

export const conversations = {
  all: () => load(KEYS.conversations, []),
  currentId: () => load(KEYS.current, null),
  setCurrent: (id) => save(KEYS.current, id),
  get(id) {
    return this.all().find((c) => c.id === id) || null;
  },
  create() {
    const c = { id: newId(), title: 'New conversation', system: '', messages: [], updated: Date.now() };
    save(KEYS.conversations, [c, ...this.all()]);
    this.setCurrent(c.id);
    return c;
  },
  put(c) {
    c.updated = Date.now();
    const rest = this.all().filter((x) => x.id !== c.id);
    save(KEYS.conversations, [c, ...rest]);
  },
  remove(id) {
    const all = this.all();
    const index = all.findIndex((c) => c.id === id);
    if (index < 0) return null;
    const [removed] = all.splice(index, 1);
    save(KEYS.conversations, all);
    return { removed, index };
  },
  restore({ removed, index }) {
    const all = this.all();
    all.splice(Math.min(index, all.length), 0, removed);
    save(KEYS.conversations, all);
  },
};
