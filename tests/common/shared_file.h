// Files from `../shared` beside the repository: the project's specs and data that are not part
// of it (the real Kimi K3 tokenizer in data/kimi-tokenizer/, OpenAI's OpenAPI description in
// data/openai-openapi.json). CI has the folder beside its clone; a user's clone has not. A test
// that needs one of its files skips, naming the file, when it is absent (docs/development.md,
// "Skips are reported, not silent"):
//
//     const auto model = k3::test::shared_file("data/kimi-tokenizer/tiktoken.model");
//     if (!std::filesystem::exists(model)) K3_SKIP(k3::test::missing_shared_file(model));
#pragma once
#include <filesystem>
#include <string>

#include "common/scratch.h"

namespace k3::test {

// $K3_SHARED_DIR/RELATIVE: ctest sets K3_SHARED_DIR from the cmake setting of that name
// (default: ../shared beside the source directory); outside ctest, ../shared.
inline std::filesystem::path shared_file(const std::string& relative) {
    return (std::filesystem::absolute(env_or("K3_SHARED_DIR", "../shared")) / relative).lexically_normal();
}

// Why a test that needs `path` skips without it.
inline std::string missing_shared_file(const std::filesystem::path& path) {
    return "needs " + path.string() +
           " (from ../shared beside the repository, as CI has it; cmake -DK3_SHARED_DIR=... points elsewhere): not found";
}

}  // namespace k3::test
