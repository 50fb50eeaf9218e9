// Reading a tokenizer from a model directory (docs/model.md "Tokenizer files"): tiktoken.model (one
// "<base64 bytes> <rank>" per line) and tokenizer_config.json (added_tokens_decoder: id ->
// {content, ...}). Also the npm tiktoken rank format used by the parity tests.
#include <algorithm>
#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/bpe_tokenizer.h"
#include "k3/error.h"

namespace k3 {

namespace {

// Kimi reserves this many ids after the ranks for special tokens (tokenization_kimi.py's
// num_reserved_special_tokens); the ones tokenizer_config.json does not name are called
// "<|reserved_token_<id>|>" there, and here.
constexpr int32_t kReservedSpecialIds = 256;

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::Config, "tokenizer: cannot open " + path.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw Error(ErrorKind::Io, "tokenizer: cannot read " + path.string());
    return ss.str();
}

int8_t base64_value(char c) {
    if (c >= 'A' && c <= 'Z') return static_cast<int8_t>(c - 'A');
    if (c >= 'a' && c <= 'z') return static_cast<int8_t>(c - 'a' + 26);
    if (c >= '0' && c <= '9') return static_cast<int8_t>(c - '0' + 52);
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

std::vector<std::string> read_tiktoken_model(const std::filesystem::path& path) {
    const std::string text = read_file(path);
    std::vector<std::string> ranks;
    std::vector<char> seen;
    // Ranks are the ids 0..N-1, one a line, so none can reach the file's line count: a rank
    // beyond it is refused before anything is sized by it (one line "... 15999999" used to
    // allocate 16 million empty tokens, 0.5 GB, before the gap was noticed).
    const size_t max_ranks = size_t(std::count(text.begin(), text.end(), '\n')) + 1;
    size_t line_no = 0;
    for (size_t pos = 0; pos < text.size();) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        std::string_view line(text.data() + pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) continue;
        auto where = [&] { return path.string() + ":" + std::to_string(line_no); };
        size_t space = line.find(' ');
        if (space == std::string_view::npos)
            throw Error(ErrorKind::Config, "tokenizer: " + where() + ": expected '<base64> <rank>'");
        std::string bytes;
        if (!base64_decode(line.substr(0, space), bytes) || bytes.empty())
            throw Error(ErrorKind::Config, "tokenizer: " + where() + ": malformed base64 token");
        std::string_view rank_text = line.substr(space + 1);
        int64_t rank = -1;
        auto [end, ec] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
        if (ec != std::errc() || end != rank_text.data() + rank_text.size() || rank < 0 || rank > 16'000'000)
            throw Error(ErrorKind::Config, "tokenizer: " + where() + ": malformed rank '" +
                                               std::string(rank_text) + "'");
        if (static_cast<size_t>(rank) >= max_ranks)
            throw Error(ErrorKind::Config, "tokenizer: " + where() + ": rank " + std::to_string(rank) +
                                               " is beyond the file's " + std::to_string(max_ranks) +
                                               " lines (ranks must be 0..N-1, the rank is the id)");
        if (static_cast<size_t>(rank) >= ranks.size()) {
            ranks.resize(static_cast<size_t>(rank) + 1);
            seen.resize(static_cast<size_t>(rank) + 1, 0);
        }
        if (seen[static_cast<size_t>(rank)])
            throw Error(ErrorKind::Config, "tokenizer: " + where() + ": rank " + std::to_string(rank) + " given twice");
        seen[static_cast<size_t>(rank)] = 1;
        ranks[static_cast<size_t>(rank)] = std::move(bytes);
    }
    for (size_t r = 0; r < seen.size(); ++r)
        if (!seen[r])
            throw Error(ErrorKind::Config, "tokenizer: " + path.string() + ": rank " + std::to_string(r) +
                                               " is missing (ranks must be 0..N-1, the rank is the id)");
    if (ranks.empty()) throw Error(ErrorKind::Config, "tokenizer: " + path.string() + " has no tokens");
    return ranks;
}

std::vector<SpecialToken> read_added_tokens(const std::filesystem::path& path) {
    nlohmann::json config;
    try {
        config = nlohmann::json::parse(read_file(path));
    } catch (const nlohmann::json::parse_error& e) {
        throw Error(ErrorKind::Config, "tokenizer: " + path.string() + ": not valid JSON: " + e.what());
    }
    if (!config.is_object() || !config.contains("added_tokens_decoder") ||
        !config["added_tokens_decoder"].is_object())
        throw Error(ErrorKind::Config, "tokenizer: " + path.string() +
                                           ": missing object field 'added_tokens_decoder'");
    std::vector<SpecialToken> specials;
    for (const auto& [key, entry] : config["added_tokens_decoder"].items()) {
        std::string field = path.string() + ": added_tokens_decoder[\"" + key + "\"]";
        int64_t id = -1;
        auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
        if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > 16'000'000)
            throw Error(ErrorKind::Config, "tokenizer: " + field + ": key is not a token id");
        if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string())
            throw Error(ErrorKind::Config, "tokenizer: " + field + ": needs a string 'content'");
        // Every added token is a control token here, including those marked "special": false
        // upstream (<|open|>, <|close|>, <|sep|>): tiktoken-based Kimi treats them all alike.
        specials.push_back({entry["content"].get<std::string>(), static_cast<int32_t>(id)});
    }
    return specials;
}

}  // namespace

bool base64_decode(std::string_view in, std::string& out) {
    out.clear();
    if (in.size() % 4 != 0) return false;
    out.reserve(in.size() / 4 * 3);
    for (size_t i = 0; i < in.size(); i += 4) {
        int8_t v[4];
        int pad = 0;
        for (int k = 0; k < 4; ++k) {
            char c = in[i + k];
            if (c == '=' && i + 4 == in.size() && k >= 2) {
                v[k] = 0;
                ++pad;
                continue;
            }
            if (pad > 0) return false;  // data after padding
            v[k] = base64_value(c);
            if (v[k] < 0) return false;
        }
        uint32_t bits = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
        out.push_back(static_cast<char>(bits >> 16));
        if (pad < 2) out.push_back(static_cast<char>((bits >> 8) & 0xFF));
        if (pad < 1) out.push_back(static_cast<char>(bits & 0xFF));
    }
    return true;
}

std::vector<std::string> parse_tiktoken_bpe_ranks(std::string_view bpe_ranks) {
    std::vector<std::string> ranks;
    size_t line_no = 0;
    for (size_t pos = 0; pos < bpe_ranks.size();) {
        size_t eol = bpe_ranks.find('\n', pos);
        if (eol == std::string_view::npos) eol = bpe_ranks.size();
        std::string_view line = bpe_ranks.substr(pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (line.empty()) continue;
        // Fields: first token's text (ignored), first rank, then base64 tokens.
        size_t a = line.find(' ');
        size_t b = a == std::string_view::npos ? a : line.find(' ', a + 1);
        if (b == std::string_view::npos)
            throw Error(ErrorKind::Config, "tiktoken bpe_ranks line " + std::to_string(line_no) + ": too few fields");
        int64_t rank = -1;
        std::string_view rank_text = line.substr(a + 1, b - a - 1);
        auto [end, ec] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
        if (ec != std::errc() || rank != static_cast<int64_t>(ranks.size()))
            throw Error(ErrorKind::Config, "tiktoken bpe_ranks line " + std::to_string(line_no) +
                                               ": ranks are not consecutive");
        for (size_t p = b + 1; p <= line.size();) {
            size_t q = line.find(' ', p);
            if (q == std::string_view::npos) q = line.size();
            std::string bytes;
            if (!base64_decode(line.substr(p, q - p), bytes) || bytes.empty())
                throw Error(ErrorKind::Config, "tiktoken bpe_ranks line " + std::to_string(line_no) +
                                                   ": malformed base64 token after rank " + std::to_string(ranks.size()));
            ranks.push_back(std::move(bytes));
            p = q + 1;
        }
    }
    return ranks;
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& dir) {
    TokenizerParts parts;
    parts.ranks = read_tiktoken_model(dir / "tiktoken.model");
    parts.pattern = SplitPattern::Kimi;
    parts.specials = read_added_tokens(dir / "tokenizer_config.json");
    const int32_t n_ranks = static_cast<int32_t>(parts.ranks.size());
    int32_t n_vocab = n_ranks + kReservedSpecialIds;
    std::vector<char> named(static_cast<size_t>(n_vocab), 0);
    for (const auto& s : parts.specials) {
        if (s.id < n_ranks)
            throw Error(ErrorKind::Config, "tokenizer: " + (dir / "tokenizer_config.json").string() +
                                               ": added token " + std::to_string(s.id) + " ('" + s.content +
                                               "') collides with a rank of tiktoken.model (0.." +
                                               std::to_string(n_ranks - 1) + ")");
        if (s.id >= n_vocab) {
            n_vocab = s.id + 1;
            named.resize(static_cast<size_t>(n_vocab), 0);
        }
        named[static_cast<size_t>(s.id)] = 1;
    }
    for (int32_t id = n_ranks; id < n_ranks + kReservedSpecialIds; ++id)
        if (!named[static_cast<size_t>(id)])
            parts.specials.push_back({"<|reserved_token_" + std::to_string(id) + "|>", id});
    parts.n_vocab = n_vocab;
    try {
        return make_bpe_tokenizer(std::move(parts));
    } catch (const Error& e) {
        throw Error(e.kind(), std::string(e.what()) + " (in " + dir.string() + ")");
    }
}

}  // namespace k3
