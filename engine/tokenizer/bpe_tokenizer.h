// Internal construction of the tokenizer from its parts: the byte-level ranks (the rank is the
// id), a pre-tokenizer pattern, and the special tokens. Tokenizer::load() builds one from the
// files of a model directory; the parity tests build one from the ranks the npm `tiktoken`
// package ships (o200k_base with the Kimi pattern, cl100k_base with its own pattern).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "k3/tokenizer.h"

namespace k3 {

enum class SplitPattern {
    Kimi,    // docs/model.md "Pre-tokenizer" (the K3 tokenizer)
    Cl100k,  // OpenAI cl100k_base (a second, independent parity check of the BPE core)
};

struct SpecialToken {
    std::string content;
    int32_t id = 0;
};

struct TokenizerParts {
    std::vector<std::string> ranks;  // ranks[r] = bytes of token r; must include all 256 bytes
    SplitPattern pattern = SplitPattern::Kimi;
    std::vector<SpecialToken> specials;  // ids >= ranks.size(), unique ids and contents
    int n_vocab = 0;  // >= ranks.size() and > every special id; 0 = derive from the above
};

// Throws k3::Error(Config) naming what is inconsistent (missing single bytes, duplicate
// tokens, special ids inside the rank range, ...).
std::unique_ptr<Tokenizer> make_bpe_tokenizer(TokenizerParts parts);

// The PCRE2 source the pattern is compiled from (a faithful translation of the reference
// regex; see split_pattern.cpp for why each construct is written the way it is).
std::string_view split_pattern_pcre2(SplitPattern pattern);

// Parses the `bpe_ranks` string of the npm tiktoken encoders (o200k_base.json, ...): lines of
// "<first token text> <first rank> <base64 token> <base64 token> ..." with consecutive ranks.
std::vector<std::string> parse_tiktoken_bpe_ranks(std::string_view bpe_ranks);

// Standard base64 (RFC 4648, with padding). Returns false on malformed input.
bool base64_decode(std::string_view in, std::string& out);

}  // namespace k3
