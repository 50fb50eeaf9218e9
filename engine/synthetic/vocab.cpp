// Synthetic byte-level BPE vocabulary (see synthetic_vocab.h). Training is the textbook rank-BPE
// loop: split the corpus into pieces on word boundaries (an ASCII reading of the Kimi split
// pattern, docs/model.md "Pre-tokenizer"), start every piece as single bytes, and repeatedly merge
// the most frequent adjacent pair. Every multi-byte token is therefore the concatenation of two
// lower-ranked tokens, which is what a rank-BPE encoder needs to ever produce it.
#include "synthetic/vocab.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "k3/error.h"

namespace k3 {

std::string_view synthetic_corpus();  // synthetic_corpus.cpp

const std::vector<NamedSpecial>& k3_named_specials() {
    static const std::vector<NamedSpecial> specials = {
        {0, "[BOS]"},
        {1, "[EOS]"},
        {2, "<|end_of_msg|>"},
        {3, "<|open|>"},
        {4, "<|close|>"},
        {5, "<|sep|>"},
        {6, "[start_header_id]"},
        {7, "[end_header_id]"},
        {9, "[EOT]"},
        {18, "<|media_begin|>"},
        {19, "<|media_content|>"},
        {20, "<|media_end|>"},
        {21, "<|media_pad|>"},
        {65, "<osagent_mode>"},
        {254, "[UNK]"},
        {255, "[PAD]"},
    };
    return specials;
}

int synthetic_bos_id(int vocab_size) { return vocab_size - kSpecialSlots; }
int synthetic_eos_id(int vocab_size) { return vocab_size - kSpecialSlots + 2; }
int synthetic_pad_id(int vocab_size) { return vocab_size - 1; }

namespace {

// Bytes >= 0x80 count as letters so that UTF-8 words stay in one piece.
bool is_letter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
bool is_upper(unsigned char c) { return c >= 'A' && c <= 'Z'; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_newline(unsigned char c) { return c == '\n' || c == '\r'; }
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_other(unsigned char c) { return !is_letter(c) && !is_digit(c) && !is_space(c); }

// Length of the letter word starting at i ([Upper]*[lower]+ or [Upper]+[lower]*, then an
// optional English contraction), or 0.
size_t word_length(std::string_view s, size_t i) {
    size_t j = i;
    while (j < s.size() && is_upper(static_cast<unsigned char>(s[j]))) ++j;
    while (j < s.size() && is_letter(static_cast<unsigned char>(s[j])) && !is_upper(static_cast<unsigned char>(s[j]))) ++j;
    if (j == i) return 0;
    if (j < s.size() && s[j] == '\'') {
        for (std::string_view tail : {"s", "t", "re", "ve", "m", "ll", "d"}) {
            if (s.substr(j + 1, tail.size()) == tail &&
                (j + 1 + tail.size() == s.size() || !is_letter(static_cast<unsigned char>(s[j + 1 + tail.size()]))))
                return j + 1 + tail.size() - i;
        }
    }
    return j - i;
}

// The corpus split into pieces, in the order of the Kimi pattern's alternatives.
std::vector<std::string_view> split_pieces(std::string_view s) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        size_t n = 0;
        // A word, optionally preceded by one character that is neither letter, digit nor newline.
        if (is_letter(c)) {
            n = word_length(s, i);
        } else if (!is_digit(c) && !is_newline(c) && i + 1 < s.size() && is_letter(static_cast<unsigned char>(s[i + 1]))) {
            n = 1 + word_length(s, i + 1);
        }
        // Up to three digits.
        if (n == 0 && is_digit(c)) {
            while (n < 3 && i + n < s.size() && is_digit(static_cast<unsigned char>(s[i + n]))) ++n;
        }
        // An optional space, a run of punctuation, trailing newlines.
        if (n == 0) {
            size_t j = i + (c == ' ' ? 1 : 0);
            size_t k = j;
            while (k < s.size() && is_other(static_cast<unsigned char>(s[k]))) ++k;
            if (k > j) {
                while (k < s.size() && is_newline(static_cast<unsigned char>(s[k]))) ++k;
                n = k - i;
            }
        }
        // Whitespace: up to and including the last newline of a run; otherwise all of it except
        // a last space that starts the next word.
        if (n == 0) {
            size_t k = i;
            while (k < s.size() && is_space(static_cast<unsigned char>(s[k]))) ++k;
            size_t last_newline = 0;
            for (size_t m = i; m < k; ++m)
                if (is_newline(static_cast<unsigned char>(s[m]))) last_newline = m + 1;
            if (last_newline > 0) {
                n = last_newline - i;
            } else {
                n = k - i;
                if (n > 1 && k < s.size()) --n;
            }
        }
        out.push_back(s.substr(i, n));
        i += n;
    }
    return out;
}

struct Piece {
    std::vector<int> ids;
    int64_t count = 0;
};

class VocabBuilder {
public:
    explicit VocabBuilder(size_t target) : target_(target) {
        for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
    }

    void learn_merges(std::string_view corpus) {
        std::map<std::string_view, int64_t> counts;
        for (auto p : split_pieces(corpus)) ++counts[p];
        std::vector<Piece> pieces;
        for (const auto& [text, count] : counts) {
            Piece p;
            p.count = count;
            for (unsigned char ch : text) p.ids.push_back(ch);
            pieces.push_back(std::move(p));
        }
        while (ranks_.size() < target_) {
            std::unordered_map<uint64_t, int64_t> pair_count;
            for (const auto& p : pieces)
                for (size_t k = 0; k + 1 < p.ids.size(); ++k) pair_count[key(p.ids[k], p.ids[k + 1])] += p.count;
            if (pair_count.empty()) break;
            // Most frequent pair; ties go to the smaller merged byte string, then the smaller ids,
            // so the result never depends on hash-map iteration order.
            uint64_t best = 0;
            int64_t best_count = -1;
            std::string best_text;
            for (const auto& [k, n] : pair_count) {
                if (n < best_count) continue;
                std::string text = ranks_[k >> 32] + ranks_[k & 0xffffffffu];
                if (n > best_count || text < best_text || (text == best_text && k < best)) {
                    best = k;
                    best_count = n;
                    best_text = std::move(text);
                }
            }
            const int a = int(best >> 32), b = int(best & 0xffffffffu);
            const int merged = add(best_text);
            for (auto& p : pieces) {
                std::vector<int> next;
                next.reserve(p.ids.size());
                for (size_t k = 0; k < p.ids.size(); ++k) {
                    if (k + 1 < p.ids.size() && p.ids[k] == a && p.ids[k + 1] == b) {
                        next.push_back(merged);
                        ++k;
                    } else {
                        next.push_back(p.ids[k]);
                    }
                }
                p.ids = std::move(next);
            }
        }
    }

    // More word-like tokens, each an existing lowercase word token (with or without a leading
    // space) plus one letter, visited breadth first in rank order until the target is reached.
    void extend_with_words() {
        static constexpr std::string_view kLetters = "etaoinsrhldcumfpgwybvkxjqz";
        std::vector<int> queue;
        for (int r = 256; r < int(ranks_.size()); ++r)
            if (is_lower_word(ranks_[size_t(r)])) queue.push_back(r);
        for (char ch : kLetters) queue.push_back(static_cast<unsigned char>(ch));
        for (size_t q = 0; q < queue.size() && ranks_.size() < target_; ++q) {
            const std::string stem = ranks_[size_t(queue[q])];
            for (char ch : kLetters) {
                if (ranks_.size() >= target_) break;
                std::string candidate = stem + ch;
                if (index_.count(candidate)) continue;
                queue.push_back(add(std::move(candidate)));
            }
        }
    }

    std::vector<std::string> take() { return std::move(ranks_); }

private:
    static uint64_t key(int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

    static bool is_lower_word(const std::string& t) {
        size_t i = (!t.empty() && t[0] == ' ') ? 1 : 0;
        if (i == t.size()) return false;
        for (; i < t.size(); ++i)
            if (t[i] < 'a' || t[i] > 'z') return false;
        return true;
    }

    // The rank of `text`, adding it when new (a merge can rebuild a string that a different
    // split already produced; it keeps its first rank).
    int add(std::string text) {
        auto it = index_.find(text);
        if (it != index_.end()) return it->second;
        const int rank = int(ranks_.size());
        index_.emplace(text, rank);
        ranks_.push_back(std::move(text));
        return rank;
    }

    size_t target_;
    std::vector<std::string> ranks_;
    std::unordered_map<std::string, int> index_;
};

void write_file(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorKind::Io, path.string() + ": cannot open for writing");
    out.write(text.data(), std::streamsize(text.size()));
    out.close();
    if (!out) throw Error(ErrorKind::Io, path.string() + ": write failed");
}

}  // namespace

std::string base64_encode(const std::string& bytes) {
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
        out += kAlphabet[v >> 18];
        out += kAlphabet[(v >> 12) & 63];
        out += kAlphabet[(v >> 6) & 63];
        out += kAlphabet[v & 63];
    }
    if (i + 1 == bytes.size()) {
        const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
        out += kAlphabet[v >> 18];
        out += kAlphabet[(v >> 12) & 63];
        out += "==";
    } else if (i + 2 == bytes.size()) {
        const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8;
        out += kAlphabet[v >> 18];
        out += kAlphabet[(v >> 12) & 63];
        out += kAlphabet[(v >> 6) & 63];
        out += '=';
    }
    return out;
}

SyntheticVocab build_synthetic_vocab(int vocab_size) {
    if (vocab_size < 256 + kSpecialSlots)
        throw Error(ErrorKind::Usage, "vocab_size " + std::to_string(vocab_size) +
                                          " is too small for a synthetic tokenizer (need at least 512: 256 byte "
                                          "ranks + 256 special slots)");
    VocabBuilder builder(size_t(vocab_size - kSpecialSlots));
    builder.learn_merges(synthetic_corpus());
    builder.extend_with_words();
    SyntheticVocab v;
    v.ranks = builder.take();
    if (v.ranks.size() != size_t(vocab_size - kSpecialSlots))
        throw Error(ErrorKind::Runtime, "synthetic vocabulary: built " + std::to_string(v.ranks.size()) +
                                            " ranks, needed " + std::to_string(vocab_size - kSpecialSlots));
    const int first = int(v.ranks.size());
    for (int slot = 0; slot < kSpecialSlots; ++slot)
        v.specials.push_back("<|reserved_token_" + std::to_string(first + slot) + "|>");
    for (const auto& s : k3_named_specials()) v.specials[size_t(s.offset)] = s.content;
    return v;
}

void write_tokenizer_files(const SyntheticVocab& v, const std::filesystem::path& dir) {
    std::string model;
    for (size_t r = 0; r < v.ranks.size(); ++r) {
        model += base64_encode(v.ranks[r]);
        model += ' ';
        model += std::to_string(r);
        model += '\n';
    }
    write_file(dir / "tiktoken.model", model);

    using Json = nlohmann::ordered_json;
    const int first = int(v.ranks.size());
    Json decoder = Json::object();
    for (int slot = 0; slot < kSpecialSlots; ++slot) {
        decoder[std::to_string(first + slot)] = {
            {"content", v.specials[size_t(slot)]}, {"lstrip", false},       {"normalized", false},
            {"rstrip", false},                     {"single_word", false}, {"special", true},
        };
    }
    Json named = Json::array();
    for (const auto& s : k3_named_specials()) named.push_back(s.content);
    Json config = {
        {"added_tokens_decoder", decoder},
        {"additional_special_tokens", named},
        {"bos_token", v.specials[0]},
        {"eos_token", v.specials[1]},
        {"pad_token", v.specials[255]},
        {"unk_token", v.specials[254]},
        {"clean_up_tokenization_spaces", false},
        {"model_max_length", 1048576},
        {"tokenizer_class", "TikTokenTokenizer"},
        {"auto_map", {{"AutoTokenizer", {"tokenization_kimi.TikTokenTokenizer", nullptr}}}},
    };
    write_file(dir / "tokenizer_config.json", config.dump(2) + "\n");
}

}  // namespace k3
