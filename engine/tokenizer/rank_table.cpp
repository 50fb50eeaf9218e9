// Rank table construction and the BPE merge loop.
#include "tokenizer/rank_table.h"

#include <algorithm>
#include <limits>
#include <queue>

#include "util/check.h"

namespace k3 {

bool RankTable::build(const std::vector<std::string>& tokens, int32_t* duplicate) {
    blob_.clear();
    offsets_.assign(1, 0);
    size_t total = 0;
    for (const auto& t : tokens) total += t.size();
    K3_CHECK(total < std::numeric_limits<uint32_t>::max(), "token bytes exceed 4 GiB");
    blob_.reserve(total);
    for (const auto& t : tokens) {
        blob_ += t;
        offsets_.push_back(static_cast<uint32_t>(blob_.size()));
    }
    size_t capacity = 16;
    while (capacity < tokens.size() * 2) capacity *= 2;
    slots_.assign(capacity, 0);
    mask_ = capacity - 1;
    for (int32_t rank = 0; rank < static_cast<int32_t>(tokens.size()); ++rank) {
        std::string_view key = bytes(rank);
        size_t slot = hash(key.data(), key.size()) & mask_;
        for (;; slot = (slot + 1) & mask_) {
            uint32_t entry = slots_[slot];
            if (entry == 0) break;
            if (bytes(static_cast<int32_t>(entry - 1)) == key) {
                if (duplicate) *duplicate = rank;
                return false;
            }
        }
        slots_[slot] = static_cast<uint32_t>(rank + 1);
    }
    return true;
}

namespace {

constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();

// Pieces up to this many bytes use the rescan merge; longer ones the heap. Typical pieces are
// a few bytes, where a linear scan over a small array beats any heap.
constexpr size_t kScanMergeMaxBytes = 128;

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

void bpe_merge_heap(const RankTable& table, std::string_view piece, std::vector<int32_t>& out) {
    // Parts form a doubly linked list over byte positions; the heap holds candidate pairs
    // (rank, start) and is checked lazily: an entry is stale once its left part died or its
    // pair changed (ranks identify byte strings, so "same rank" means "same pair").
    const uint32_t n = static_cast<uint32_t>(piece.size());
    constexpr uint32_t kEnd = std::numeric_limits<uint32_t>::max();
    std::vector<uint32_t> next(n), prev(n);
    std::vector<int32_t> pair_rank(n, kNoRank);
    std::vector<char> alive(n, 1);
    for (uint32_t i = 0; i < n; ++i) {
        next[i] = i + 1 < n ? i + 1 : kEnd;
        prev[i] = i > 0 ? i - 1 : kEnd;
    }
    auto end_of = [&](uint32_t i) { return next[i] == kEnd ? n : next[i]; };
    auto rank_of = [&](uint32_t i) -> int32_t {
        if (next[i] == kEnd) return kNoRank;
        uint32_t stop = end_of(next[i]);
        int32_t r = table.find(piece.data() + i, stop - i);
        return r == RankTable::kNone ? kNoRank : r;
    };
    using Entry = std::pair<int32_t, uint32_t>;  // (rank, start): lowest rank, then leftmost
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    for (uint32_t i = 0; i < n; ++i) {
        pair_rank[i] = rank_of(i);
        if (pair_rank[i] != kNoRank) heap.push({pair_rank[i], i});
    }
    while (!heap.empty()) {
        auto [rank, i] = heap.top();
        heap.pop();
        if (!alive[i] || pair_rank[i] != rank) continue;
        uint32_t j = next[i];  // merge part j into part i
        next[i] = next[j];
        if (next[j] != kEnd) prev[next[j]] = i;
        alive[j] = 0;
        pair_rank[i] = rank_of(i);
        if (pair_rank[i] != kNoRank) heap.push({pair_rank[i], i});
        if (prev[i] != kEnd) {
            uint32_t p = prev[i];
            pair_rank[p] = rank_of(p);
            if (pair_rank[p] != kNoRank) heap.push({pair_rank[p], p});
        }
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
