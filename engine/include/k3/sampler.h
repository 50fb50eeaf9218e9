// Choosing the next token from logits: greedy by default; temperature, top_k, top_p and min_p with
// a seed give reproducible output (same seed, same tokens). Pure functions over logits plus a
// seeded RNG; no model knowledge. Truncation order: top_k, then top_p over the mass left by top_k,
// then min_p relative to the most likely token. RNG: PCG32 seeded as docs/model.md "Sampling and
// its seed" says.
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

// The greedy choice, for the sampler at temperature 0 and for `k3serve run`: the largest
// logit, the lowest id among equal ones; NaN never wins over a number (a row of NaN, or an
// empty one, gives 0). -inf is a number: a row of -inf and NaN gives the first -inf.
int32_t greedy_token(std::span<const float> logits);

// Empty when valid, otherwise a message naming the parameter and its allowed range.
std::string validate(const SamplingParams& params);

class Sampler {
public:
    explicit Sampler(const SamplingParams& params);
    int32_t sample(std::span<const float> logits);
    // Natural-log probability of `id` under the distribution sampled from (temperature 1 when
    // greedy).
    // Temperature is applied; the top_k/top_p/min_p cut is not (so the value is always finite
    // for a finite logit and comparable across candidates).
    float logprob(std::span<const float> logits, int32_t id) const;

private:
    uint32_t next_u32();     // PCG32 step
    double next_uniform();   // [0, 1) from 53 bits of two steps

    SamplingParams params_;
    uint64_t state_ = 0, inc_ = 0;
    std::vector<std::pair<float, int32_t>> scratch_;
};

}  // namespace k3
