// A conversation is a tree of messages, so that editing or regenerating keeps the alternatives
// (‹1/3› on the message): every message names its parent, and `leaf` is the last message of the
// branch on screen. A deleted message stays as a tombstone (`deleted`, with its time), so that a
// merge with another tab's copy does not bring it back.
//   conversation: {id, title, renamed, system, created, updated, metaUpdated, leaf, nodes: {id: node}}
//   node: {id, parent, role, content, reasoning?, attachments?, stats?, error?, stopped?, created, updated, deleted?}

export function newId() {
  return Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
}

export function createConversation() {
  const now = Date.now();
  return { id: newId(), title: 'New conversation', renamed: false, system: '', created: now, updated: now,
    metaUpdated: now, leaf: null, nodes: {} };
}

// The first UI's conversation ({messages: [...]}) as a tree with one branch.
export function fromMessages(old) {
  const c = { ...createConversation(), id: old.id, title: old.title || 'New conversation', renamed: Boolean(old.renamed),
    system: old.system || '', updated: old.updated || Date.now(), metaUpdated: old.updated || Date.now() };
  let parent = null;
  (old.messages || []).forEach((m, i) => {
    const node = { ...m, id: old.id + '-' + i, parent, created: c.created + i, updated: c.created + i };
    delete node.reasoningChunks;
    c.nodes[node.id] = node;
    parent = node.id;
  });
  c.leaf = parent;
  return c;
}

const alive = (n) => n && !n.deleted;

// The messages of the branch on screen, first to last.
export function pathOf(c) {
  const out = [];
  for (let n = c.nodes[c.leaf]; alive(n); n = c.nodes[n.parent]) out.push(n);
  return out.reverse();
}

export function childrenOf(c, parentId) {
  return Object.values(c.nodes).filter((n) => alive(n) && (n.parent ?? null) === (parentId ?? null))
    .sort((a, b) => a.created - b.created);
}

export function siblingsOf(c, node) {
  return childrenOf(c, node.parent);
}

// The end of the branch through `id`: at each step the most recently changed child.
export function deepestFrom(c, id) {
  let n = c.nodes[id];
  for (;;) {
    const kids = childrenOf(c, n.id);
    if (!kids.length) return n.id;
    n = kids.reduce((a, b) => (b.updated > a.updated ? b : a));
  }
}

export function isAncestor(c, ancestorId, id) {
  for (let n = c.nodes[id]; n; n = c.nodes[n.parent]) if (n.id === ancestorId) return true;
  return false;
}

// Adds a message under `parentId` (null: the first message) and makes it the branch's end.
export function addNode(c, parentId, fields) {
  const now = Date.now();
  const node = { id: newId(), parent: parentId ?? null, created: now, updated: now, content: '', ...fields };
  c.nodes[node.id] = node;
  c.leaf = node.id;
  return node;
}

export function touch(node) {
  node.updated = Date.now();
}

// Deletes a message and everything after it in its branches; the view moves to a sibling's
// branch when there is one, else to the message before.
export function deleteNode(c, id) {
  const now = Date.now();
  const doomed = Object.values(c.nodes).filter((n) => alive(n) && isAncestor(c, id, n.id));
  for (const n of doomed) { n.deleted = true; n.updated = now; n.content = ''; n.reasoning = ''; n.attachments = []; }
  const node = c.nodes[id];
  const sibling = siblingsOf(c, node)[0];
  if (sibling) c.leaf = deepestFrom(c, sibling.id);
  else c.leaf = alive(c.nodes[node.parent]) ? node.parent : null;
}

// Shows the branch through `id` (a sibling picked with ‹ ›), to its newest end.
export function showBranch(c, id) {
  c.leaf = deepestFrom(c, id);
}

// `mine` merged with `other` (another tab's or the database's copy): every message of both
// (the newer copy of one message wins, so a deletion or a streamed answer's end is kept); title
// and system prompt from whichever changed them last; mine's branch on screen, unless the other
// copy only went further along it.
export function mergeConversations(mine, other) {
  const nodes = { ...other.nodes };
  for (const [id, n] of Object.entries(mine.nodes)) if (!nodes[id] || n.updated >= nodes[id].updated) nodes[id] = n;
  const meta = (other.metaUpdated || 0) > (mine.metaUpdated || 0) ? other : mine;
  const merged = { ...mine, nodes, title: meta.title, renamed: meta.renamed, system: meta.system,
    metaUpdated: Math.max(mine.metaUpdated || 0, other.metaUpdated || 0),
    updated: Math.max(mine.updated || 0, other.updated || 0) };
  const ok = (id) => id && alive(nodes[id]);
  if (!ok(merged.leaf) || (ok(other.leaf) && (mine.leaf === null || isAncestor(merged, mine.leaf, other.leaf)))) {
    merged.leaf = ok(other.leaf) ? other.leaf : null;
  }
  return merged;
}
