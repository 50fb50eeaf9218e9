// What an engine computes for a fixed prompt, recorded for bit-for-bit comparison between two
// ways of running the same model (memory budgets, background loading, ...): every prompt
// position's logits, then the logits and argmax token of each greedy decode step.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "k3/engine.h"

namespace k3::test {

struct EngineOutputs {
    std::vector<float> prefill;              // every prompt position's logits
    std::vector<std::vector<float>> decode;  // each greedy step's logits
    std::vector<int32_t> tokens;             // each greedy step's token
};

// n token ids spread over the vocabulary.
inline std::vector<int32_t> spread_prompt(int vocab, int n) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(int32_t((i * 37 + 11) % vocab));
    return p;
}

inline int32_t argmax(std::span<const float> v) { return int32_t(std::max_element(v.begin(), v.end()) - v.begin()); }

// The prompt's logits at every position (one session), then `steps` greedy steps (another).
inline EngineOutputs record_outputs(Engine& engine, const std::vector<int32_t>& prompt, int steps) {
    EngineOutputs out;
    {
        auto s = engine.new_session(64);
        REQUIRE(s->prefill_all_logits(prompt, out.prefill).ok());
    }
    auto s = engine.new_session(64);
    CancelFlag cancel{false};
    REQUIRE(s->sync(prompt, cancel).ok());
    for (int step = 0; step < steps; ++step) {
        auto l = s->logits();
        out.decode.emplace_back(l.begin(), l.end());
        out.tokens.push_back(argmax(l));
        REQUIRE(s->append(out.tokens.back(), cancel).ok());
    }
    return out;
}

inline bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace k3::test
