// Shared by the tests/model suites: small helpers over Engine/Session. Test models come from
// common/model_cache.h (cached_model).
#pragma once
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/scratch.h"
#include "common/model_cache.h"
#include "k3/engine.h"

namespace k3::test {

// prompt_cache_gb < 0: the default budget; 0: no prompt cache (every sync is cold unless it
// extends the session's live state).
inline std::unique_ptr<Engine> load_engine(const std::string& dir, int threads, const std::string& kernels = "",
                                           double prompt_cache_gb = -1) {
    EngineOptions o;
    o.model_dir = dir;
    o.threads = threads;
    o.kernels = kernels;
    o.memory.prompt_cache_gb = prompt_cache_gb;
    return Engine::load(o);
}

// A deterministic prompt of n ids inside the ordinary (non-special) vocabulary.
inline std::vector<int32_t> test_prompt(int n, int vocab, int salt = 0) {
    std::vector<int32_t> ids;
    const int ordinary = vocab > 512 ? vocab - 256 : vocab / 2;
    for (int i = 0; i < n; ++i) ids.push_back(int32_t((i * 37 + salt * 101 + 11) % ordinary));
    return ids;
}

// The logits after `ids` evaluated from an empty state by an engine without a prompt cache (one
// per process and model directory, loaded on first use): the reference every resume is held
// to. Empty if the evaluation failed.
inline std::vector<float> cold_logits_of(const std::string& dir, const std::vector<int32_t>& ids) {
    static std::string loaded;
    static std::unique_ptr<Engine> cold;
    if (!cold || loaded != dir) {
        cold = load_engine(dir, 2, "", 0);
        loaded = dir;
    }
    auto s = cold->new_session(int(ids.size()) + 8);
    CancelFlag cancel{false};
    if (!s->sync(ids, cancel).ok()) return {};
    return {s->logits().begin(), s->logits().end()};
}

// Bytes the prompt cache holds after one prompt of n tokens (its rows and one snapshot), for
// budgets counted in snapshots.
inline int64_t one_snapshot_bytes(const std::string& dir, int n) {
    auto probe = load_engine(dir, 2, "", 1.0);
    auto s = probe->new_session(n + 8);
    CancelFlag cancel{false};
    if (!s->sync(test_prompt(n, probe->info().n_vocab, 1), cancel).ok()) return 0;
    return probe->stats().prompt_cache_bytes;
}

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline int32_t argmax(std::span<const float> v) {
    int32_t best = 0;
    for (size_t i = 1; i < v.size(); ++i)
        if (v[i] > v[size_t(best)]) best = int32_t(i);
    return best;
}

}  // namespace k3::test
