// Rank table construction and the BPE merge loop.
#include "tokenizer/rank_table.h"

#include <algorithm>
#include <limits>

#include "util/check.h"

namespace k3 {

bool RankTable::build(const std::vector<std::string>& tokens, int32_t* duplicate) {
    blob_.clear();
    offsets_.assign(1, 0);
    size_t total = 0;
    for (const auto& t : tokens) total += t.size();
    K3_CHECK(total < std::numeric_limits<uint32_t>::max(), "token bytes exceed 4 GiB");
    blob_.reserve(total);
    max_length_ = 0;
    for (const auto& t : tokens) {
        max_length_ = std::max(max_length_, t.size());
        blob_ += t;
        offsets_.push_back(static_cast<uint32_t>(blob_.size()));
    }
    size_t capacity = 16;
    while (capacity < tokens.size() * 2) capacity *= 2;
    slots_.assign(capacity, 0);
    mask_ = capacity - 1;
    for (int32_t rank = 0; rank < static_cast<int32_t>(tokens.size()); ++rank) {
        std::string_view key = bytes(rank);
        uint64_t h = hash(key.data(), key.size());
        size_t slot = h & mask_;
        for (;; slot = (slot + 1) & mask_) {
            uint64_t entry = slots_[slot];
            if (entry == 0) break;
            if (bytes(static_cast<int32_t>(static_cast<uint32_t>(entry) - 1)) == key) {
                if (duplicate) *duplicate = rank;
                return false;
            }
        }
        slots_[slot] = (uint64_t(fingerprint(h)) << 32) | static_cast<uint32_t>(rank + 1);
    }
    return true;
}

namespace {

constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();

// Pieces up to this many bytes use the rescan merge; longer ones the min-tree. Typical pieces
// are a few bytes, where a linear scan over a small array beats any tree.
constexpr size_t kScanMergeMaxBytes = 48;

}  // namespace

void bpe_merge_scan(const RankTable& table, std::string_view piece, std::vector<int32_t>& out) {
    // parts[i] = start of part i; pair_rank[i] = rank of part i joined with part i+1.
    const size_t n = piece.size();
    thread_local std::vector<uint32_t> starts;
    thread_local std::vector<int32_t> pair_rank;
    starts.resize(n + 1);
    pair_rank.resize(n + 1);
    for (size_t i = 0; i <= n; ++i) starts[i] = static_cast<uint32_t>(i);
    size_t parts = n;  // number of parts; starts[parts] == n
    auto rank_of = [&](size_t i) -> int32_t {  // pair (i, i+1)
        if (i + 2 > parts) return kNoRank;
        int32_t r = table.find(piece.data() + starts[i], starts[i + 2] - starts[i]);
        return r == RankTable::kNone ? kNoRank : r;
    };
    for (size_t i = 0; i + 1 < parts; ++i) pair_rank[i] = rank_of(i);
    while (parts > 1) {
        int32_t best = kNoRank;
        size_t at = 0;
        for (size_t i = 0; i + 1 < parts; ++i)
            if (pair_rank[i] < best) best = pair_rank[i], at = i;
        if (best == kNoRank) break;
        // Merge part at+1 into part at.
        for (size_t i = at + 1; i < parts; ++i) starts[i] = starts[i + 1];
        for (size_t i = at + 1; i + 1 < parts; ++i) pair_rank[i] = pair_rank[i + 1];
        --parts;
        pair_rank[at] = rank_of(at);
        if (at > 0) pair_rank[at - 1] = rank_of(at - 1);
    }
    for (size_t i = 0; i < parts; ++i) {
        int32_t r = table.find(piece.data() + starts[i], starts[i + 1] - starts[i]);
        K3_DCHECK(r != RankTable::kNone, "BPE part without a rank");
        out.push_back(r);
    }
}

namespace {

// The candidate pairs of a long piece, one slot per byte position (the pair starting at that
// part), under a tree of block minima with fan-out 16. Keys pack (rank << 32 | start), so the
// root is the lowest rank, leftmost on ties, exactly the pair the reference merges next.
// Unlike a heap there are no stale entries, and updates touch contiguous memory near the
// merged position, which keeps a 1 MB piece in cache-friendly territory.
class PairMinTree {
public:
    static constexpr uint64_t kNoPair = std::numeric_limits<uint64_t>::max();

    explicit PairMinTree(std::vector<uint64_t> leaves) {
        levels_.push_back(std::move(leaves));
        while (levels_.back().size() > 1) {
            const auto& below = levels_.back();
            std::vector<uint64_t> level((below.size() + kFan - 1) / kFan, kNoPair);
            for (size_t i = 0; i < below.size(); ++i) level[i / kFan] = std::min(level[i / kFan], below[i]);
            levels_.push_back(std::move(level));
        }
    }
    uint64_t min() const { return levels_.back().empty() ? kNoPair : levels_.back()[0]; }
    void set(size_t i, uint64_t key) {
        levels_[0][i] = key;
        for (size_t k = 1; k < levels_.size(); ++k) {
            const auto& below = levels_[k - 1];
            size_t block = i / kFan, first = block * kFan, last = std::min(first + kFan, below.size());
            uint64_t m = kNoPair;
            for (size_t c = first; c < last; ++c) m = std::min(m, below[c]);
            if (levels_[k][block] == m) break;  // nothing above changes
            levels_[k][block] = m;
            i = block;
        }
    }

private:
    static constexpr size_t kFan = 16;
    std::vector<std::vector<uint64_t>> levels_;
};

}  // namespace

void bpe_merge_heap(const RankTable& table, std::string_view piece, std::vector<int32_t>& out) {
    // Parts form a doubly linked list over byte positions; each live part's slot in the tree
    // holds the key of the pair (part, next part), or kNoPair.
    const uint32_t n = static_cast<uint32_t>(piece.size());
    constexpr uint32_t kEnd = std::numeric_limits<uint32_t>::max();
    std::vector<uint32_t> next(n), prev(n);
    for (uint32_t i = 0; i < n; ++i) {
        next[i] = i + 1 < n ? i + 1 : kEnd;
        prev[i] = i > 0 ? i - 1 : kEnd;
    }
    auto end_of = [&](uint32_t i) { return next[i] == kEnd ? n : next[i]; };
    auto pair_key = [&](uint32_t i) -> uint64_t {
        if (next[i] == kEnd) return PairMinTree::kNoPair;
        int32_t r = table.find(piece.data() + i, end_of(next[i]) - i);
        return r == RankTable::kNone ? PairMinTree::kNoPair : (uint64_t(uint32_t(r)) << 32) | i;
    };
    std::vector<uint64_t> leaves(n);
    for (uint32_t i = 0; i < n; ++i) leaves[i] = pair_key(i);
    PairMinTree tree(std::move(leaves));
    for (uint64_t top; (top = tree.min()) != PairMinTree::kNoPair;) {
        uint32_t i = static_cast<uint32_t>(top);
        uint32_t j = next[i];  // merge part j into part i
        next[i] = next[j];
        if (next[j] != kEnd) prev[next[j]] = i;
        tree.set(j, PairMinTree::kNoPair);
        tree.set(i, pair_key(i));
        if (prev[i] != kEnd) tree.set(prev[i], pair_key(prev[i]));
    }
    for (uint32_t i = 0; i != kEnd; i = next[i]) {
        int32_t r = table.find(piece.data() + i, end_of(i) - i);
        K3_DCHECK(r != RankTable::kNone, "BPE part without a rank");
        out.push_back(r);
    }
}

void bpe_encode_piece(const RankTable& table, std::string_view piece, std::vector<int32_t>& out) {
    if (piece.empty()) return;
    int32_t whole = table.find(piece);
    if (whole != RankTable::kNone) {
        out.push_back(whole);
        return;
    }
    if (piece.size() <= kScanMergeMaxBytes)
        bpe_merge_scan(table, piece, out);
    else
        bpe_merge_heap(table, piece, out);
}

}  // namespace k3
