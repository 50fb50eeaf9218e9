// The tokenizer of a synthetic checkpoint: a byte-level BPE vocabulary in K3's file formats
// (docs/model.md "Tokenizer files"). Ids 0..255 are the single bytes; further ranks are merges
// learned deterministically from a small embedded English/code corpus, then (when the vocabulary
// asks for more than the corpus yields) longer words built from existing tokens. The top 256 ids
// are special slots with K3's 16 named specials at K3's relative positions.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace k3 {

inline constexpr int kSpecialSlots = 256;

// A named K3 special token at `offset` from the first special id (K3: 163584 + offset).
struct NamedSpecial {
    int offset;
    const char* content;
};
// The 16 named specials of docs/model.md "Tokenizer files"; every other slot is
// "<|reserved_token_ID|>" (ID absolute).
const std::vector<NamedSpecial>& k3_named_specials();

// The ids config.json declares for a vocabulary of `vocab_size`, at K3's relative positions
// (K3: bos 163584 [BOS], eos 163586 <|end_of_msg|>, pad 163839 [PAD]).
int synthetic_bos_id(int vocab_size);
int synthetic_eos_id(int vocab_size);
int synthetic_pad_id(int vocab_size);

struct SyntheticVocab {
    std::vector<std::string> ranks;     // rank (= id) -> token bytes; size vocab_size - 256
    std::vector<std::string> specials;  // slot -> content; id = ranks.size() + slot; size 256
    int vocab_size() const { return int(ranks.size() + specials.size()); }
};

// Deterministic: the same vocab_size always gives the same vocabulary. Throws
// k3::Error(Usage) when vocab_size < 512 (256 byte ranks + 256 special slots).
SyntheticVocab build_synthetic_vocab(int vocab_size);

// Writes `dir`/tiktoken.model ("base64(bytes) rank" per line) and `dir`/tokenizer_config.json
// (added_tokens_decoder keyed by id string). Throws k3::Error(Io) naming the file on failure.
void write_tokenizer_files(const SyntheticVocab& vocab, const std::filesystem::path& dir);

// Standard base64 (RFC 4648, with padding), as tiktoken.model spells token bytes.
std::string base64_encode(const std::string& bytes);

}  // namespace k3
