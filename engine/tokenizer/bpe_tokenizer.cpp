// The tokenizer proper: special-token splitting, UTF-8 validation, pre-tokenization and BPE
// (docs/model.md "BPE"), and decoding.
#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "tokenizer/rank_table.h"
#include "tokenizer/split_pattern.h"
#include "tokenizer/utf8.h"
#include "k3/error.h"

namespace k3 {

namespace {

class BpeTokenizer final : public Tokenizer {
public:
    explicit BpeTokenizer(TokenizerParts parts);

    std::vector<int32_t> encode(std::string_view text, bool allow_special) const override;
    std::string decode(std::span<const int32_t> ids) const override;
    std::string_view token_bytes(int32_t id) const override;
    bool is_special(int32_t id) const override { return id >= n_ranks_ && id < n_vocab_ && !special_bytes_[id - n_ranks_].empty(); }
    std::optional<int32_t> special_id(std::string_view content) const override;
    int n_vocab() const override { return n_vocab_; }

private:
    // Text without specials: cut at invalid UTF-8 bytes, pre-tokenize, BPE.
    void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;
    // The special token that starts at text[pos] (longest if several), or -1.
    int32_t special_at(std::string_view text, size_t pos) const;

    RankTable ranks_;
    Pretokenizer pretokenizer_;
    int32_t n_ranks_ = 0;
    int32_t n_vocab_ = 0;
    std::vector<std::string> special_bytes_;  // index id - n_ranks_; empty = no token there
    std::unordered_map<std::string, int32_t> special_ids_;
    // For special_at(): ids of specials by first byte, longest content first.
    std::array<std::vector<int32_t>, 256> specials_by_first_byte_;
};

BpeTokenizer::BpeTokenizer(TokenizerParts parts) : pretokenizer_(parts.pattern) {
    n_ranks_ = static_cast<int32_t>(parts.ranks.size());
    for (int32_t r = 0; r < n_ranks_; ++r)
        if (parts.ranks[r].empty())
            throw Error(ErrorKind::Config, "tokenizer: rank " + std::to_string(r) + " has no bytes");
    int32_t duplicate = -1;
    if (!ranks_.build(parts.ranks, &duplicate))
        throw Error(ErrorKind::Config, "tokenizer: rank " + std::to_string(duplicate) +
                                           " repeats the bytes of an earlier rank");
    for (int b = 0; b < 256; ++b) {
        char c = static_cast<char>(b);
        if (ranks_.find(&c, 1) == RankTable::kNone)
            throw Error(ErrorKind::Config, "tokenizer: no rank for the single byte " + std::to_string(b) +
                                               " (byte-level BPE needs all 256)");
    }
    int32_t max_special = n_ranks_ - 1;
    for (const auto& s : parts.specials) max_special = std::max(max_special, s.id);
    n_vocab_ = parts.n_vocab > 0 ? parts.n_vocab : max_special + 1;
    if (n_vocab_ < n_ranks_ || n_vocab_ <= max_special)
        throw Error(ErrorKind::Config, "tokenizer: n_vocab " + std::to_string(n_vocab_) +
                                           " is smaller than the ranks and special ids");
    special_bytes_.assign(static_cast<size_t>(n_vocab_ - n_ranks_), {});
    for (const auto& s : parts.specials) {
        if (s.id < n_ranks_)
            throw Error(ErrorKind::Config, "tokenizer: special token '" + s.content + "' has id " +
                                               std::to_string(s.id) + ", inside the rank range 0.." +
                                               std::to_string(n_ranks_ - 1));
        if (s.content.empty())
            throw Error(ErrorKind::Config, "tokenizer: special token " + std::to_string(s.id) + " is empty");
        if (!special_bytes_[s.id - n_ranks_].empty())
            throw Error(ErrorKind::Config, "tokenizer: special id " + std::to_string(s.id) + " given twice");
        if (!special_ids_.emplace(s.content, s.id).second)
            throw Error(ErrorKind::Config, "tokenizer: special token '" + s.content + "' given twice");
        special_bytes_[s.id - n_ranks_] = s.content;
        specials_by_first_byte_[static_cast<unsigned char>(s.content[0])].push_back(s.id);
    }
    for (auto& ids : specials_by_first_byte_)
        std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
            return special_bytes_[a - n_ranks_].size() > special_bytes_[b - n_ranks_].size();
        });
}

int32_t BpeTokenizer::special_at(std::string_view text, size_t pos) const {
    for (int32_t id : specials_by_first_byte_[static_cast<unsigned char>(text[pos])]) {
        const std::string& s = special_bytes_[id - n_ranks_];
        if (text.compare(pos, s.size(), s) == 0) return id;
    }
    return -1;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool allow_special) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    if (!allow_special || special_ids_.empty()) {
        encode_ordinary(text, out);
        return out;
    }
    // Leftmost special first; the text before it is ordinary.
    size_t start = 0;
    for (size_t pos = 0; pos < text.size(); ++pos) {
        if (specials_by_first_byte_[static_cast<unsigned char>(text[pos])].empty()) continue;
        int32_t id = special_at(text, pos);
        if (id < 0) continue;
        encode_ordinary(text.substr(start, pos - start), out);
        out.push_back(id);
        pos += special_bytes_[id - n_ranks_].size() - 1;
        start = pos + 1;
    }
    encode_ordinary(text.substr(start), out);
    return out;
}

void BpeTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
    // Invalid UTF-8 (README, "Tokenizer"): every byte that does not belong to a valid sequence
    // becomes its own single-byte token, and each valid stretch between such bytes is encoded
    // as if it were a text of its own.
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = pos;
        while (end < text.size()) {
            unsigned char c = static_cast<unsigned char>(text[end]);
            if (c < 0x80) {
                ++end;
                continue;
            }
            size_t len = utf8::valid_sequence_length(text, end);
            if (len == 0) break;
            end += len;
        }
        std::string_view valid = text.substr(pos, end - pos);
        pretokenizer_.split(valid, [&](size_t offset, size_t length) {
            bpe_encode_piece(ranks_, valid.substr(offset, length), out);
        });
        if (end < text.size()) {
            out.push_back(ranks_.find(text.data() + end, 1));
            ++end;
        }
        pos = end;
    }
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
    std::string out;
    for (int32_t id : ids) {
        std::string_view bytes = token_bytes(id);
        if (bytes.empty())
            throw Error(ErrorKind::Usage, "tokenizer: unknown token id " + std::to_string(id) +
                                              " (vocabulary has " + std::to_string(n_vocab_) + " ids)");
        out += bytes;
    }
    return out;
}

std::string_view BpeTokenizer::token_bytes(int32_t id) const {
    if (id < 0 || id >= n_vocab_) return {};
    if (id < n_ranks_) return ranks_.bytes(id);
    return special_bytes_[id - n_ranks_];
}

std::optional<int32_t> BpeTokenizer::special_id(std::string_view content) const {
    auto it = special_ids_.find(std::string(content));
    if (it == special_ids_.end()) return std::nullopt;
    return it->second;
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(TokenizerParts parts) {
    return std::make_unique<BpeTokenizer>(std::move(parts));
}

}  // namespace k3
