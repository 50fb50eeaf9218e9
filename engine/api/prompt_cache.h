// PromptCache: sequence states of earlier prompts, shared by every Session of an Engine, so a
// request resumes from the longest cached prefix of ANY earlier request of its partition (the
// same prompt again, a shared system prompt with a different user turn, a conversation resumed
// after others ran, an edited last message).
//
// Partitions: every lookup and insertion names one (a Session's set_cache_partition, engine.h),
// and a state made in one partition is never found, restored or hinted at (Match::matched) from
// another: each partition has a tree of its own. The daemon gives each API key its partition,
// so cached_tokens cannot tell one key how far its guess matches another key's prompt
// (docs/operations.md "The prompt cache and API keys"); without keys all is partition 0.
// The byte budget is one for all partitions: eviction takes the least recently used of any.
//
// A radix tree over token ids. Each node holds a run of tokens and the MLA latent rows of those
// positions (a row depends only on the tokens up to it, so a node's rows serve every prompt that
// passes through it). A node may also hold a snapshot of the whole KDA state (recurrent matrices
// and conv history) at its end position, and the logits of that position when they were
// computed: the KDA state exists only for one position, so a prompt can resume only at a node
// end with a snapshot. Snapshots are placed by the sessions (end of every prompt, end of every
// generation, chunk ends of long prompts, and the point where a prompt left the tree).
//
// Memory is bounded by a byte budget; when it is exceeded the least recently used leaf is
// removed or the least recently used inner snapshot dropped, until it fits. Restoring copies
// into the session's state, so nothing in the tree is ever borrowed.
//
// With a disk tier (set_disk_tier, prompt_cache_disk.h) a snapshot leaving RAM is written to
// disk first, a snapshot that carries its logits (end of a prompt or a generation) is written
// at once, and find() loads a verified disk state back into the tree when it resumes further
// than anything in RAM.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "api/prompt_cache_disk.h"
#include "model/state.h"

namespace k3 {

struct PromptCacheStats {
    uint64_t lookups = 0;
    uint64_t hits = 0;             // lookups that resumed past position 0
    uint64_t tokens_saved = 0;     // prompt tokens not recomputed thanks to the cache
    uint64_t insertions = 0;
    uint64_t evictions = 0;        // leaves removed or snapshots dropped for the budget
    int64_t bytes = 0;             // held now
    int64_t budget = 0;
    int nodes = 0, snapshots = 0;  // now
    bool has_disk = false;
    PromptCacheDiskStats disk;
};

class PromptCache {
public:
    // budget_bytes <= 0 disables the cache (lookups miss, insertions are dropped).
    PromptCache(int64_t budget_bytes, const ModelConfig& cfg);
    ~PromptCache();

    // Where `tokens` can resume from: `resume` tokens of state (a node end with a snapshot;
    // when resume == tokens.size() the snapshot also has the logits), and how many leading
    // tokens the tree knows (`matched` >= resume): a snapshot placed there serves the next
    // prompt that shares them. With a disk tier, a longer prefix found there is verified and
    // loaded into the tree first (a refused file is removed and the search goes on).
    struct Match {
        size_t resume = 0;
        size_t matched = 0;
    };
    Match find(uint64_t partition, std::span<const int32_t> tokens);

    // Copies the state of tokens[0, resume) (found by find()) into st, and the logits into
    // `logits` when resume == tokens.size(). Counts the lookup and marks the path as used.
    // Returns false (st untouched) if the entry is gone.
    bool restore(uint64_t partition, std::span<const int32_t> tokens, size_t resume, SequenceState& st,
                 std::span<float> logits);
    // Counts a lookup that found nothing worth restoring.
    void count_miss() { ++stats_.lookups; }

    // Stores the state of tokens (st.n_past == tokens.size()): the latent rows the tree does not
    // have yet and a KDA snapshot at the end, with the logits of the last position when given.
    void insert(uint64_t partition, std::span<const int32_t> tokens, const SequenceState& st,
                std::span<const float> logits);

    // Adds the disk tier below the RAM tree (the RAM budget must be > 0 for it to be used).
    void set_disk_tier(std::unique_ptr<PromptCacheDisk> disk) { disk_ = std::move(disk); }

    PromptCacheStats stats() const;
    int64_t budget() const { return budget_; }

    // One line per snapshot, most recently used first (for /slots).
    struct EntrySummary {
        uint64_t partition = 0;
        size_t tokens = 0;
        bool has_logits = false;
        int64_t bytes = 0;
        uint64_t last_used = 0;
    };
    std::vector<EntrySummary> entries() const;

private:
    struct Node;
    // The partition's tree, made on first use; existing_root: null when it has none.
    Node* root_of(uint64_t partition);
    Node* existing_root(uint64_t partition) const;
    // Every partition's root: where whole-cache walks (eviction, stats, entries) start.
    std::vector<Node*> all_roots() const;
    Node* walk(Node* root, std::span<const int32_t> tokens, size_t* matched, std::vector<Node*>* path) const;
    Match find_in_ram(uint64_t partition, std::span<const int32_t> tokens) const;
    // insert() for rows laid out [n_mla][stride][row_floats] (a SequenceState's, stride n_ctx,
    // or a PromptState's, stride = its length); returns the node that ends at tokens.size().
    Node* insert_rows(uint64_t partition, std::span<const int32_t> tokens, const float* rows, size_t stride,
                      std::span<const float> kda, std::span<const float> logits);
    // The state a snapshot node resumes at (its path's rows gathered), for the disk tier.
    PromptState state_at(const Node& node) const;
    void write_to_disk(Node& node);
    void split(Node* node, size_t at);
    void evict_to_budget();
    void remove_leaf(Node* node);
    void drop_snapshot(Node* node);
    int64_t node_bytes(const Node& n) const;

    int64_t budget_;
    int64_t row_floats_;       // one MLA row of one layer
    int n_mla_ = 0;
    std::map<uint64_t, std::unique_ptr<Node>> roots_;  // by partition; a root holds no tokens
    uint64_t clock_ = 0;       // recency: bumped on every use
    PromptCacheStats stats_;
    std::unique_ptr<PromptCacheDisk> disk_;
};

}  // namespace k3
