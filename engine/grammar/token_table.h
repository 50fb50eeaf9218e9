// What TokenTable holds (k3/grammar.h): each token's bytes, the ordinary tokens sorted by their
// bytes with the length of the prefix each shares with the one before (so the vocabulary can be
// walked as a trie without building one), and the special tokens by text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace k3::grammar {

struct TokenTableData {
    int n_vocab = 0;
    std::string bytes;                    // every token's bytes, concatenated by id
    std::vector<uint32_t> offset;         // id -> start in `bytes`; offset[n_vocab] = end
    std::vector<int32_t> sorted;          // ordinary tokens (non-empty, not special) by bytes
    std::vector<uint16_t> shared_prefix;  // sorted[i]'s common prefix length with sorted[i-1]
    std::unordered_map<std::string, int32_t> special_ids;  // text -> id
    std::vector<uint8_t> is_special;      // id -> 1 for special tokens
    std::vector<int32_t> end_ids;
    size_t max_token_bytes = 0;
    double build_seconds = 0;

    std::string_view token(int32_t id) const { return {bytes.data() + offset[size_t(id)], offset[size_t(id) + 1] - offset[size_t(id)]}; }
};

}  // namespace k3::grammar
