// Tokenizer throughput: MB/s of encoding the parity corpus (every case, several rounds) with the
// Kimi pattern over o200k_base and with cl100k_base, plus a 1 MiB single-line input against its
// one-second limit. bench_tokenizer.sh runs this next to npm tiktoken on the same corpus and
// prints the ratio. Usage: bench_tokenizer [SOURCE_DIR] (default: $K3_SOURCE_DIR or .)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "../tokenizer/tokenizer_fixtures.h"

using namespace k3;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Best of `rounds` passes over the corpus, in MB/s (1e6 bytes).
double corpus_mb_per_s(const Tokenizer& tok, const std::vector<std::string>& corpus, size_t bytes, int rounds,
                       size_t& n_tokens) {
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) {
        auto t0 = Clock::now();
        n_tokens = 0;
        for (const auto& text : corpus) n_tokens += tok.encode(text, false).size();
        best = std::min(best, seconds_since(t0));
    }
    return static_cast<double>(bytes) / best / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1) setenv("K3_SOURCE_DIR", argv[1], 1);
    std::vector<std::string> corpus;
    size_t bytes = 0;
    for (const auto& row : test::read_jsonl(test::tokenizer_fixtures() / "corpus.jsonl")) {
        corpus.push_back(row.get<std::string>());
        bytes += corpus.back().size();
    }
    // "Typical" = the cases under 1 kB (prose, code, JSON, mixed scripts), without the long
    // repeated runs on which the reference's quadratic merge dominates the corpus figure.
    std::vector<std::string> typical;
    size_t typical_bytes = 0;
    for (const auto& text : corpus)
        if (text.size() < 1000) typical.push_back(text), typical_bytes += text.size();
    auto kimi = test::kimi_over_o200k();
    auto cl = test::cl100k();
    size_t n_kimi = 0, n_cl = 0;
    double kimi_mbs = corpus_mb_per_s(*kimi, corpus, bytes, 5, n_kimi);
    double cl_mbs = corpus_mb_per_s(*cl, corpus, bytes, 5, n_cl);
    std::printf("corpus: %zu cases, %.2f MB\n", corpus.size(), bytes / 1e6);
    std::printf("k3 kimi/o200k: %.2f MB/s (%zu tokens)\n", kimi_mbs, n_kimi);
    std::printf("k3 cl100k: %.2f MB/s (%zu tokens)\n", cl_mbs, n_cl);
    double kimi_typ = corpus_mb_per_s(*kimi, typical, typical_bytes, 5, n_kimi);
    double cl_typ = corpus_mb_per_s(*cl, typical, typical_bytes, 5, n_cl);
    std::printf("typical: %zu cases, %.2f MB\n", typical.size(), typical_bytes / 1e6);
    std::printf("k3 typical kimi/o200k: %.2f MB/s (%zu tokens)\n", kimi_typ, n_kimi);
    std::printf("k3 typical cl100k: %.2f MB/s (%zu tokens)\n", cl_typ, n_cl);

    // Long single lines: one 1 MiB piece of letters (the heap merge), and 1 MiB of mixed text
    // without a newline.
    std::string letters, mixed;
    while (letters.size() < (1 << 20)) letters += "abcdefghij";
    for (size_t i = 0; mixed.size() < (1 << 20); ++i) {
        std::string s = corpus[i % corpus.size()];
        for (char& c : s)
            if (c == '\n' || c == '\r') c = ' ';
        mixed += s;
    }
    for (auto [name, text] : {std::pair{"1 MiB one-piece line", &letters}, std::pair{"1 MiB mixed line", &mixed}}) {
        auto t0 = Clock::now();
        size_t n = kimi->encode(*text, false).size();
        double s = seconds_since(t0);
        std::printf("k3 %s: %.3f s (%zu tokens), %.3f of the 1 s limit\n", name, s, n, s / 1.0);
    }
    return 0;
}
