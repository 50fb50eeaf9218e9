// The real Kimi tokenizer (tiktoken.model + tokenizer_config.json) from
// ../shared/data/kimi-tokenizer (tests/common/shared_file.h; K3_REAL_TOKENIZER_DIR names another
// copy). A test that needs it skips, naming the missing file:
//     const Tokenizer* tok = k3::test::real_tokenizer();
//     if (!tok) K3_SKIP(k3::test::real_tokenizer_missing());
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include "common/scratch.h"
#include "common/shared_file.h"
#include "k3/tokenizer.h"

namespace k3::test {

inline std::filesystem::path real_tokenizer_dir() {
    return env_or("K3_REAL_TOKENIZER_DIR", shared_file("data/kimi-tokenizer").string());
}

// The first of the tokenizer's files that is not there, or "" when both are.
inline std::string real_tokenizer_missing_file() {
    for (const char* name : {"tiktoken.model", "tokenizer_config.json"})
        if (!std::filesystem::exists(real_tokenizer_dir() / name)) return (real_tokenizer_dir() / name).string();
    return "";
}

inline std::string real_tokenizer_missing() { return missing_shared_file(real_tokenizer_missing_file()); }

// Loaded once per process; null when a file is missing.
inline const Tokenizer* real_tokenizer() {
    static const std::unique_ptr<Tokenizer> tok =
        real_tokenizer_missing_file().empty() ? Tokenizer::load(real_tokenizer_dir()) : nullptr;
    return tok.get();
}

}  // namespace k3::test
