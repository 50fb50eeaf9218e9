// Shared by the libFuzzer targets: a real byte-level BPE tokenizer (the synthetic vocabulary
// every test model uses, written once to a temporary directory and loaded the normal way), and a
// check that aborts with a message (libFuzzer reports an abort as a crash with its input).
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "k3/tokenizer.h"
#include "synthetic/vocab.h"

namespace k3::fuzz {

inline const Tokenizer& tokenizer() {
    static std::unique_ptr<Tokenizer> tok = [] {
        auto dir = std::filesystem::temp_directory_path() / ("k3fuzz-tok-" + std::to_string(getpid()));
        std::filesystem::create_directories(dir);
        write_tokenizer_files(build_synthetic_vocab(1024), dir);
        auto t = Tokenizer::load(dir);
        std::filesystem::remove_all(dir);
        return t;
    }();
    return *tok;
}

#define K3_FUZZ_CHECK(cond, what)                                             \
    do {                                                                      \
        if (!(cond)) {                                                        \
            std::fprintf(stderr, "fuzz invariant failed: %s (%s)\n", what, #cond); \
            std::abort();                                                     \
        }                                                                     \
    } while (0)

}  // namespace k3::fuzz

// Targets that use the tokenizer build it before the first input: learning the vocabulary's
// merges takes seconds under ASan, which would count against the first input's timeout.
#define K3_FUZZ_INIT_TOKENIZER                                  \
    extern "C" int LLVMFuzzerInitialize(int*, char***) {       \
        (void)k3::fuzz::tokenizer();                            \
        return 0;                                               \
    }
