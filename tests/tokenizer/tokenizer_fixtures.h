// Shared helpers for the tokenizer tests: the fixture directory, JSONL readers, and tokenizers
// built from the npm tiktoken ranks (tests/node/node_modules/tiktoken, installed by
// scripts/test.sh) with the Kimi or cl100k pattern.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokenizer/bpe_tokenizer.h"

namespace k3::test {

inline std::filesystem::path source_dir() {
    const char* dir = std::getenv("K3_SOURCE_DIR");
    return dir ? dir : ".";
}

inline std::filesystem::path tokenizer_fixtures() { return source_dir() / "tests" / "fixtures" / "tokenizer"; }

inline std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
    std::vector<nlohmann::json> rows;
    std::istringstream in(read_text(path));
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
    return rows;
}

// The ranks of an npm tiktoken encoder ("o200k_base", "cl100k_base").
inline nlohmann::json npm_encoder(const std::string& name) {
    auto path = source_dir() / "tests" / "node" / "node_modules" / "tiktoken" / "encoders" / (name + ".json");
    if (!std::filesystem::exists(path))
        throw std::runtime_error(path.string() + " is missing: run `npm install` in tests/node (scripts/test.sh does)");
    return nlohmann::json::parse(read_text(path));
}

// Kimi pattern over o200k_base, with Kimi's special names after the ranks (the goldens' setup).
inline std::unique_ptr<Tokenizer> kimi_over_o200k() {
    TokenizerParts parts;
    parts.ranks = parse_tiktoken_bpe_ranks(npm_encoder("o200k_base")["bpe_ranks"].get<std::string>());
    parts.pattern = SplitPattern::Kimi;
    auto specials = nlohmann::json::parse(read_text(tokenizer_fixtures() / "kimi_o200k_specials.json"));
    for (const auto& [content, id] : specials["specials"].items()) parts.specials.push_back({content, id.get<int32_t>()});
    return make_bpe_tokenizer(std::move(parts));
}

inline std::unique_ptr<Tokenizer> cl100k() {
    auto enc = npm_encoder("cl100k_base");
    TokenizerParts parts;
    parts.ranks = parse_tiktoken_bpe_ranks(enc["bpe_ranks"].get<std::string>());
    parts.pattern = SplitPattern::Cl100k;
    for (const auto& [content, id] : enc["special_tokens"].items()) parts.specials.push_back({content, id.get<int32_t>()});
    return make_bpe_tokenizer(std::move(parts));
}

}  // namespace k3::test
