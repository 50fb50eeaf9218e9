// What OpenAI clients ask to change in the next-token scores before sampling: presence and
// frequency penalties over the tokens generated so far, and a fixed bias per token id
// (logit_bias). Applied to a copy of the logits, in a fixed order (bias, then penalties), so a
// run is as deterministic as without them; a request without any leaves the logits untouched
// (no copy at all). Constrained decoding masks the adjusted scores afterwards.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace k3 {

struct LogitAdjustments {
    float presence_penalty = 0;   // subtracted once from every token generated at least once
    float frequency_penalty = 0;  // subtracted per occurrence
    std::vector<std::pair<int32_t, float>> bias;  // added to the token's logit

    bool any() const { return presence_penalty != 0 || frequency_penalty != 0 || !bias.empty(); }
};

class LogitAdjuster {
public:
    explicit LogitAdjuster(LogitAdjustments adjustments) : a_(std::move(adjustments)) {}

    // The scores to sample from: `logits` itself when there is nothing to adjust, otherwise an
    // adjusted copy (valid until the next call).
    std::span<const float> apply(std::span<const float> logits);
    // A token was generated (counts for the penalties).
    void observe(int32_t id);

private:
    LogitAdjustments a_;
    std::unordered_map<int32_t, int> counts_;
    std::vector<float> scratch_;
};

}  // namespace k3
