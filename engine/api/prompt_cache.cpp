// The shared prompt cache (prompt_cache.h): a radix tree of token runs per partition with their
// MLA latent rows, KDA snapshots at chosen node ends, LRU eviction across all partitions within
// one byte budget.
#include "api/prompt_cache.h"

#include <algorithm>
#include <cstring>

namespace k3 {

struct PromptCache::Node {
    Node* parent = nullptr;            // null: a partition's root (no tokens)
    uint64_t partition = 0;            // set on the root: the one every node below belongs to
    size_t start = 0;                  // position of seg[0] in the prompt
    std::vector<int32_t> seg;          // this node's tokens
    std::vector<float> rows;           // [n_mla][seg.size()][row_floats]: latent rows of those positions
    std::vector<float> kda;            // KDA state at end() (empty: no snapshot)
    std::vector<float> logits;         // logits of position end() - 1 (empty: not kept)
    std::map<int32_t, std::unique_ptr<Node>> children;  // by first token
    uint64_t last_used = 0;
    bool on_disk = false;              // the disk tier holds the snapshot (with the logits if
    bool on_disk_with_logits = false;  // on_disk_with_logits)

    size_t end() const { return start + seg.size(); }
    bool is_root() const { return parent == nullptr; }
    bool has_snapshot() const { return !kda.empty(); }
};

namespace {

int count_mla(const ModelConfig& c) {
    int n = 0;
    for (int il = 0; il < c.num_hidden_layers; ++il) n += c.is_mla(il) ? 1 : 0;
    return n;
}

constexpr int64_t kNodeOverheadBytes = 128;

}  // namespace

PromptCache::PromptCache(int64_t budget_bytes, const ModelConfig& cfg)
    : budget_(budget_bytes), n_mla_(count_mla(cfg)) {
    row_floats_ = cfg.mla_kv_latent_dim();  // as SequenceState::mla_row_floats
    stats_.budget = budget_;
}

PromptCache::~PromptCache() = default;

int64_t PromptCache::node_bytes(const Node& n) const {
    return kNodeOverheadBytes +
           int64_t(sizeof(float)) * int64_t(n.seg.size() + n.rows.size() + n.kda.size() + n.logits.size());
}

PromptCache::Node* PromptCache::root_of(uint64_t partition) {
    std::unique_ptr<Node>& root = roots_[partition];
    if (!root) {
        root = std::make_unique<Node>();
        root->partition = partition;
    }
    return root.get();
}

PromptCache::Node* PromptCache::existing_root(uint64_t partition) const {
    auto it = roots_.find(partition);
    return it == roots_.end() ? nullptr : it->second.get();
}

std::vector<PromptCache::Node*> PromptCache::all_roots() const {
    std::vector<Node*> out;
    for (const auto& [partition, root] : roots_) out.push_back(root.get());
    return out;
}

// Follows tokens down one partition's tree (none: nothing matches). *matched = how many leading
// tokens the tree holds; *path = the nodes passed, the last one possibly matched only in part.
PromptCache::Node* PromptCache::walk(Node* root, std::span<const int32_t> tokens, size_t* matched,
                                     std::vector<Node*>* path) const {
    *matched = 0;
    Node* node = root;
    if (!node) return nullptr;
    size_t pos = 0;
    while (pos < tokens.size()) {
        auto it = node->children.find(tokens[pos]);
        if (it == node->children.end()) break;
        Node* child = it->second.get();
        size_t j = 0;
        while (j < child->seg.size() && pos + j < tokens.size() && child->seg[j] == tokens[pos + j]) ++j;
        if (path) path->push_back(child);
        pos += j;
        node = child;
        if (j < child->seg.size()) break;
    }
    *matched = pos;
    return node;
}

PromptCache::Match PromptCache::find(uint64_t partition, std::span<const int32_t> tokens) {
    Match m = find_in_ram(partition, tokens);
    if (!disk_ || budget_ <= 0) return m;
    // A longer prefix on disk (of this partition): verified and loaded into the tree, then found
    // there. A refused file leaves the disk's index, so the next longest is tried.
    for (size_t n; (n = disk_->longest(partition, tokens, m.resume)) > 0;) {
        PromptState s;
        if (!disk_->load(partition, tokens.first(n), &s)) continue;
        Node* node = insert_rows(partition, s.tokens, s.rows.data(), n, s.kda, s.logits);
        node->on_disk = true;
        node->on_disk_with_logits = !s.logits.empty();
        evict_to_budget();
        return find_in_ram(partition, tokens);
    }
    return m;
}

PromptCache::Match PromptCache::find_in_ram(uint64_t partition, std::span<const int32_t> tokens) const {
    Match m;
    if (budget_ <= 0) return m;
    std::vector<Node*> path;
    walk(existing_root(partition), tokens, &m.matched, &path);
    for (const Node* n : path)
        if (n->end() <= m.matched && n->has_snapshot() && (n->end() < tokens.size() || !n->logits.empty()))
            m.resume = n->end();
    return m;
}

bool PromptCache::restore(uint64_t partition, std::span<const int32_t> tokens, size_t resume, SequenceState& st,
                          std::span<float> logits) {
    size_t matched = 0;
    std::vector<Node*> path;
    walk(existing_root(partition), tokens, &matched, &path);
    const Node* at = nullptr;
    for (const Node* n : path)
        if (n->end() == resume && n->end() <= matched && n->has_snapshot()) at = n;
    if (!at || resume > size_t(st.n_ctx) || (resume == tokens.size() && at->logits.empty())) return false;

    const int64_t R = row_floats_;
    for (const Node* n : path) {
        if (n->start >= resume) break;
        const size_t len = std::min(n->end(), resume) - n->start;
        for (int l = 0; l < n_mla_; ++l) {
            float* dst = st.mla_rows.data() + (size_t(l) * size_t(st.n_ctx) + n->start) * size_t(R);
            std::memcpy(dst, n->rows.data() + size_t(l) * n->seg.size() * size_t(R), len * size_t(R) * sizeof(float));
        }
    }
    std::copy(at->kda.begin(), at->kda.end(), st.kda.begin());
    st.n_past = int(resume);
    if (resume == tokens.size()) std::copy(at->logits.begin(), at->logits.end(), logits.begin());

    ++clock_;
    for (Node* n : path)
        if (n->start < resume) n->last_used = clock_;
    ++stats_.lookups;
    ++stats_.hits;
    stats_.tokens_saved += resume;
    return true;
}

// Cuts node after `at` of its tokens: the first part stays in the tree as an inner node with
// the rows of those positions; the rest (with the snapshot and the children) becomes its child.
void PromptCache::split(Node* node, size_t at) {
    auto tail = std::make_unique<Node>();
    tail->parent = node;
    tail->start = node->start + at;
    tail->seg.assign(node->seg.begin() + std::ptrdiff_t(at), node->seg.end());
    const size_t n_old = node->seg.size(), R = size_t(row_floats_);
    std::vector<float> head_rows(size_t(n_mla_) * at * R);
    tail->rows.resize(size_t(n_mla_) * (n_old - at) * R);
    for (int l = 0; l < n_mla_; ++l) {
        const float* src = node->rows.data() + size_t(l) * n_old * R;
        std::copy_n(src, at * R, head_rows.data() + size_t(l) * at * R);
        std::copy_n(src + at * R, (n_old - at) * R, tail->rows.data() + size_t(l) * (n_old - at) * R);
    }
    tail->kda = std::move(node->kda);
    tail->logits = std::move(node->logits);
    tail->children = std::move(node->children);
    for (auto& [id, c] : tail->children) c->parent = tail.get();
    tail->last_used = node->last_used;
    tail->on_disk = node->on_disk;
    tail->on_disk_with_logits = node->on_disk_with_logits;
    node->on_disk = node->on_disk_with_logits = false;

    node->seg.resize(at);
    node->rows = std::move(head_rows);
    node->kda.clear();
    node->logits.clear();
    node->children.clear();
    node->children.emplace(tail->seg[0], std::move(tail));
}

void PromptCache::insert(uint64_t partition, std::span<const int32_t> tokens, const SequenceState& st,
                         std::span<const float> logits) {
    if (budget_ <= 0 || tokens.empty() || size_t(st.n_past) != tokens.size()) return;
    Node* node = insert_rows(partition, tokens, st.mla_rows.data(), size_t(st.n_ctx), st.kda, logits);
    // A state with its logits (a prompt's or a generation's end) goes to disk at once, so it
    // survives a restart; the others only when they leave RAM.
    if (disk_ && node->has_snapshot() && !node->logits.empty() && !node->on_disk_with_logits) write_to_disk(*node);
    evict_to_budget();
}

PromptCache::Node* PromptCache::insert_rows(uint64_t partition, std::span<const int32_t> tokens, const float* rows,
                                            size_t stride, std::span<const float> kda, std::span<const float> logits) {
    size_t matched = 0;
    std::vector<Node*> path;
    Node* node = walk(root_of(partition), tokens, &matched, &path);
    if (!node->is_root() && matched < node->end()) split(node, matched - node->start);

    if (matched < tokens.size()) {
        const size_t n = tokens.size() - matched, R = size_t(row_floats_);
        auto leaf = std::make_unique<Node>();
        leaf->parent = node;
        leaf->start = matched;
        leaf->seg.assign(tokens.begin() + std::ptrdiff_t(matched), tokens.end());
        leaf->rows.resize(size_t(n_mla_) * n * R);
        for (int l = 0; l < n_mla_; ++l)
            std::copy_n(rows + (size_t(l) * stride + matched) * R, n * R, leaf->rows.data() + size_t(l) * n * R);
        Node* raw = leaf.get();
        node->children.emplace(leaf->seg[0], std::move(leaf));
        node = raw;
        path.push_back(node);
    }
    if (!node->has_snapshot()) {
        node->kda.assign(kda.begin(), kda.end());
        node->on_disk = node->on_disk_with_logits = false;
    }
    if (node->logits.empty() && !logits.empty()) node->logits.assign(logits.begin(), logits.end());
    ++stats_.insertions;

    ++clock_;
    for (Node* n : path) n->last_used = clock_;
    return node;
}

PromptState PromptCache::state_at(const Node& node) const {
    std::vector<const Node*> path;
    const Node* root = &node;
    for (; !root->is_root(); root = root->parent) path.push_back(root);
    std::reverse(path.begin(), path.end());
    const size_t n = node.end(), R = size_t(row_floats_);
    PromptState s;
    s.partition = root->partition;
    s.tokens.reserve(n);
    s.rows.resize(size_t(n_mla_) * n * R);
    for (const Node* p : path) {
        s.tokens.insert(s.tokens.end(), p->seg.begin(), p->seg.end());
        for (int l = 0; l < n_mla_; ++l)
            std::copy_n(p->rows.data() + size_t(l) * p->seg.size() * R, p->seg.size() * R,
                        s.rows.data() + (size_t(l) * n + p->start) * R);
    }
    s.kda = node.kda;
    s.logits = node.logits;
    return s;
}

void PromptCache::write_to_disk(Node& node) {
    const PromptState s = state_at(node);
    disk_->store(s);
    // (a failed write is counted by the disk tier; the state then lives in RAM only)
    if (disk_->has(s.partition, s.tokens, !s.logits.empty())) {
        node.on_disk = true;
        node.on_disk_with_logits = !s.logits.empty();
    }
}

void PromptCache::drop_snapshot(Node* node) {
    node->on_disk = node->on_disk_with_logits = false;
    node->kda.clear();
    node->kda.shrink_to_fit();
    node->logits.clear();
    node->logits.shrink_to_fit();
}

// Removes a leaf, and then every ancestor left as a leaf without a snapshot (it can no longer
// be resumed from); a partition left empty loses its root too.
void PromptCache::remove_leaf(Node* node) {
    while (!node->is_root() && node->children.empty()) {
        Node* parent = node->parent;
        const bool keep_parent = parent->is_root() || parent->has_snapshot() || parent->children.size() > 1;
        parent->children.erase(node->seg[0]);
        node = parent;
        if (keep_parent) break;
    }
    if (node->is_root() && node->children.empty()) roots_.erase(node->partition);
}

void PromptCache::evict_to_budget() {
    for (;;) {
        int64_t total = 0;
        Node* victim = nullptr;  // the least recently used of every partition's candidates
        std::vector<Node*> stack = all_roots();
        while (!stack.empty()) {
            Node* n = stack.back();
            stack.pop_back();
            if (!n->is_root()) {
                total += node_bytes(*n);
                const bool candidate = n->children.empty() || n->has_snapshot();
                if (candidate && (!victim || n->last_used < victim->last_used)) victim = n;
            }
            for (auto& [id, c] : n->children) stack.push_back(c.get());
        }
        stats_.bytes = total;
        if (total <= budget_ || !victim) return;
        ++stats_.evictions;
        // Leaving RAM: to disk first, unless it is there already.
        if (disk_ && victim->has_snapshot() && !(victim->on_disk && (victim->on_disk_with_logits || victim->logits.empty())))
            write_to_disk(*victim);
        if (victim->children.empty())
            remove_leaf(victim);
        else
            drop_snapshot(victim);
    }
}

PromptCacheStats PromptCache::stats() const {
    PromptCacheStats s = stats_;
    s.has_disk = disk_ != nullptr;
    if (disk_) s.disk = disk_->stats();
    s.nodes = 0;
    s.snapshots = 0;
    s.bytes = 0;
    std::vector<Node*> stack = all_roots();
    while (!stack.empty()) {
        const Node* n = stack.back();
        stack.pop_back();
        if (!n->is_root()) {
            ++s.nodes;
            s.snapshots += n->has_snapshot() ? 1 : 0;
            s.bytes += node_bytes(*n);
        }
        for (const auto& [id, c] : n->children) stack.push_back(c.get());
    }
    return s;
}

std::vector<PromptCache::EntrySummary> PromptCache::entries() const {
    std::vector<EntrySummary> out;
    std::vector<Node*> stack = all_roots();
    while (!stack.empty()) {
        const Node* n = stack.back();
        stack.pop_back();
        if (n->has_snapshot()) {
            int64_t bytes = 0;
            const Node* p = n;
            for (; !p->is_root(); p = p->parent) bytes += node_bytes(*p);
            out.push_back({p->partition, n->end(), !n->logits.empty(), bytes, n->last_used});
        }
        for (const auto& [id, c] : n->children) stack.push_back(c.get());
    }
    std::sort(out.begin(), out.end(), [](const EntrySummary& a, const EntrySummary& b) { return a.last_used > b.last_used; });
    return out;
}

}  // namespace k3
