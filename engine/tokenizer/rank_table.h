// Byte string -> rank lookup for BPE: an open-addressing hash table over the token bytes kept
// in one contiguous blob. The hot operation of encoding, so no std::string keys.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace k3 {

class RankTable {
public:
    static constexpr int32_t kNone = -1;

    // tokens[r] = bytes of rank r. Returns false (and the first duplicate rank in *duplicate)
    // when two ranks have the same bytes.
    bool build(const std::vector<std::string>& tokens, int32_t* duplicate);

    int32_t find(const char* p, size_t n) const {
        if (n > max_length_) return kNone;
        uint64_t h = hash(p, n);
        const uint32_t tag = fingerprint(h);
        for (size_t slot = h & mask_;; slot = (slot + 1) & mask_) {
            uint64_t entry = slots_[slot];
            if (entry == 0) return kNone;
            if (static_cast<uint32_t>(entry >> 32) != tag) continue;  // most misses end here
            int32_t rank = static_cast<int32_t>(static_cast<uint32_t>(entry) - 1);
            if (length(rank) == n && equal_bytes(blob_.data() + offsets_[rank], p, n)) return rank;
        }
    }
    int32_t find(std::string_view s) const { return find(s.data(), s.size()); }
    std::string_view bytes(int32_t rank) const {
        return {blob_.data() + offsets_[rank], length(rank)};
    }
    int32_t size() const { return static_cast<int32_t>(offsets_.size()) - 1; }

private:
    // Tokens are short: an inline word-wise compare beats a call to memcmp.
    static bool equal_bytes(const char* a, const char* b, size_t n) {
        for (; n >= 8; a += 8, b += 8, n -= 8) {
            uint64_t x, y;
            std::memcpy(&x, a, 8);
            std::memcpy(&y, b, 8);
            if (x != y) return false;
        }
        for (; n > 0; --n)
            if (*a++ != *b++) return false;
        return true;
    }
    static uint64_t hash(const char* p, size_t n) {
        uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xD6E8FEB86659FD93ull);
        while (n >= 8) {
            uint64_t w;
            std::memcpy(&w, p, 8);
            h = (h ^ w) * 0xFF51AFD7ED558CCDull;
            h ^= h >> 32;
            p += 8;
            n -= 8;
        }
        uint64_t w = 0;
        std::memcpy(&w, p, n);
        h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
        h ^= h >> 29;
        h *= 0x94D049BB133111EBull;
        return h ^ (h >> 32);
    }
    static uint32_t fingerprint(uint64_t h) { return static_cast<uint32_t>(h >> 40) | 1u; }
    size_t length(int32_t rank) const { return offsets_[rank + 1] - offsets_[rank]; }

    std::string blob_;
    std::vector<uint32_t> offsets_;
    std::vector<uint64_t> slots_;  // fingerprint << 32 | (rank + 1); 0 = empty
    size_t mask_ = 0;
    size_t max_length_ = 0;  // longest token: longer strings need no lookup
};

// Rank-based BPE of one piece (docs/model.md "BPE", as tiktoken does): start from single bytes,
// repeatedly merge the adjacent pair whose concatenation has the lowest rank (leftmost on ties)
// until no pair is a token. A piece that is itself a token is emitted whole, as tiktoken does.
// Appends ids.
// Every single byte must have a rank (checked when the table is built).
void bpe_encode_piece(const RankTable& table, std::string_view piece, std::vector<int32_t>& out);

// The two merge strategies behind bpe_encode_piece, exposed for tests that compare them:
// a rescan per merge (fast for short pieces) and a min-tree over a linked list (O(n log n)).
void bpe_merge_scan(const RankTable& table, std::string_view piece, std::vector<int32_t>& out);
void bpe_merge_heap(const RankTable& table, std::string_view piece, std::vector<int32_t>& out);

}  // namespace k3
