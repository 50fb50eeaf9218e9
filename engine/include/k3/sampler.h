// Choosing the next token from logits: greedy by default; temperature, top_k, top_p and min_p
// with a seed give reproducible output (same seed, same tokens). Pure functions over logits
// plus a seeded RNG; no model knowledge.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace k3 {

struct SamplingParams {
    float temperature = 0.0f;  // 0 = greedy (argmax, lowest id wins ties)
    int top_k = 0;             // 0 = off
    float top_p = 1.0f;        // 1 = off
    float min_p = 0.0f;        // 0 = off
    uint64_t seed = 0;
};

// Empty when valid, otherwise a message naming the parameter and its allowed range.
std::string validate(const SamplingParams& params);

class Sampler {
public:
    explicit Sampler(const SamplingParams& params);
    int32_t sample(std::span<const float> logits);
    // Natural-log probability of `id` under the distribution sampled from (temperature 1 when greedy).
    float logprob(std::span<const float> logits, int32_t id) const;

private:
    SamplingParams params_;
    uint64_t state_ = 0, inc_ = 0;
    std::vector<std::pair<float, int32_t>> scratch_;
};

}  // namespace k3
