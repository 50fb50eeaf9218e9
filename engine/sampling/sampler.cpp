// Next-token choice (docs/model.md "Sampling and its seed"): greedy, or temperature with top-k,
// min-p and top-p truncation, drawn from a seeded PCG32 so that the same seed gives the same
// tokens.
#include "k3/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "k3/error.h"

namespace k3 {

namespace {

constexpr float kMaxTemperature = 100.0f;
constexpr uint64_t kPcgMultiplier = 6364136223846793005ull;

uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

std::string range_error(const char* name, const char* range, double value) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s must be %s (got %g)", name, range, value);
    return buf;
}

// Ties in probability go to the lower id, so the order (and with it every draw) is total.
bool by_prob_desc(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
}

}  // namespace

int32_t greedy_token(std::span<const float> logits) {
    int32_t best = -1;
    for (size_t i = 0; i < logits.size(); ++i)
        if (!std::isnan(logits[i]) && (best < 0 || logits[i] > logits[size_t(best)])) best = int32_t(i);
    return best < 0 ? 0 : best;
}

std::string validate(const SamplingParams& p) {
    if (!(p.temperature >= 0.0f && p.temperature <= kMaxTemperature))
        return range_error("temperature", "between 0 (greedy) and 100", p.temperature);
    if (p.top_k < 0) return range_error("top_k", ">= 0 (0 = off)", p.top_k);
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return range_error("top_p", "in (0, 1] (1 = off)", p.top_p);
    if (!(p.min_p >= 0.0f && p.min_p < 1.0f)) return range_error("min_p", "in [0, 1) (0 = off)", p.min_p);
    return {};
}

Sampler::Sampler(const SamplingParams& params) : params_(params) {
    if (std::string err = validate(params); !err.empty()) throw Error(ErrorKind::Usage, "sampling: " + err);
    // docs/model.md "Sampling and its seed" (turn 0): init and sequence from two splitmix64 steps of the seed.
    uint64_t x = params.seed;
    uint64_t init = splitmix64(x);
    uint64_t seq = splitmix64(x);
    inc_ = 2 * seq + 1;
    state_ = 0;
    next_u32();
    state_ += init;
    next_u32();
}

uint32_t Sampler::next_u32() {
    // PCG32 (XSH RR): 64-bit LCG state, 32-bit output.
    uint64_t old = state_;
    state_ = old * kPcgMultiplier + inc_;
    uint32_t xorshifted = static_cast<uint32_t>(((old >> 18) ^ old) >> 27);
    uint32_t rot = static_cast<uint32_t>(old >> 59);
    return (xorshifted >> rot) | (xorshifted << ((32u - rot) & 31u));
}

double Sampler::next_uniform() {
    // 53 random bits from two draws: U in [0, 1).
    uint64_t hi = next_u32(), lo = next_u32();
    return static_cast<double>((hi << 21) ^ (lo & 0x1FFFFF)) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<const float> logits) {
    if (logits.empty()) throw Error(ErrorKind::Usage, "sampling: empty logits");
    if (params_.temperature == 0.0f) return greedy_token(logits);

    // Probabilities exp(logit/T - max), unnormalised; NaN and -inf get 0.
    const float inv_t = 1.0f / params_.temperature;
    float max_scaled = -std::numeric_limits<float>::infinity();
    for (float l : logits)
        if (l * inv_t > max_scaled) max_scaled = l * inv_t;
    if (!std::isfinite(max_scaled)) return greedy_token(logits);
    scratch_.resize(logits.size());
    double total = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
        float p = std::isnan(logits[i]) ? 0.0f : std::exp(logits[i] * inv_t - max_scaled);
        scratch_[i] = {p, static_cast<int32_t>(i)};
        total += p;
    }
    // Truncation, in the order top_k -> top_p -> min_p. Candidates are ordered by probability
    // (ties: lower id first) whenever a prefix is cut; only as much is sorted as is cut.
    size_t keep = scratch_.size();
    bool sorted = false;
    if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
        keep = static_cast<size_t>(params_.top_k);
        std::partial_sort(scratch_.begin(), scratch_.begin() + keep, scratch_.end(), by_prob_desc);
        sorted = true;
        total = 0;
        for (size_t i = 0; i < keep; ++i) total += scratch_[i].first;
    }
    if (params_.top_p < 1.0f) {
        // The shortest prefix holding top_p of the remaining mass. Without top_k, sort a
        // growing prefix until it holds that much.
        const double target = params_.top_p * total;
        if (!sorted) {
            size_t n_sorted = std::min<size_t>(keep, 64);
            for (;;) {
                std::partial_sort(scratch_.begin(), scratch_.begin() + n_sorted, scratch_.begin() + keep, by_prob_desc);
                double mass = 0;
                for (size_t i = 0; i < n_sorted; ++i) mass += scratch_[i].first;
                if (mass >= target || n_sorted == keep) break;
                n_sorted = std::min(keep, n_sorted * 4);
            }
            sorted = true;
        }
        double acc = 0;
        size_t n = 0;
        while (n < keep) {
            acc += scratch_[n++].first;
            if (acc >= target) break;
        }
        keep = std::max<size_t>(n, 1);
    }
    if (params_.min_p > 0.0f) {
        // Drop candidates below min_p times the most likely one (whose weight is exactly 1).
        const float floor = params_.min_p;
        if (sorted) {
            while (keep > 1 && scratch_[keep - 1].first < floor) --keep;
        } else {
            keep = static_cast<size_t>(std::remove_if(scratch_.begin(), scratch_.begin() + keep,
                                                      [&](const auto& c) { return c.first < floor; }) -
                                       scratch_.begin());
        }
    }
    if (keep != scratch_.size()) {
        total = 0;
        for (size_t i = 0; i < keep; ++i) total += scratch_[i].first;
    }
    // Draw r = U * mass and return the first candidate whose running sum exceeds it.
    double r = next_uniform() * total, acc = 0;
    for (size_t i = 0; i < keep; ++i) {
        acc += scratch_[i].first;
        if (acc > r) return scratch_[i].second;
    }
    // Rounding left r at the very end: the last candidate with any mass.
    for (size_t i = keep; i-- > 0;)
        if (scratch_[i].first > 0) return scratch_[i].second;
    return greedy_token(logits);
}

float Sampler::logprob(std::span<const float> logits, int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= logits.size())
        throw Error(ErrorKind::Usage, "sampling: logprob of id " + std::to_string(id) + " outside the logits");
    const double inv_t = params_.temperature == 0.0f ? 1.0 : 1.0 / params_.temperature;
    double max_scaled = -std::numeric_limits<double>::infinity();
    for (float l : logits)
        if (!std::isnan(l)) max_scaled = std::max(max_scaled, l * inv_t);
    if (!std::isfinite(max_scaled) || std::isnan(logits[id])) return -std::numeric_limits<float>::infinity();
    double sum = 0;
    for (float l : logits)
        if (!std::isnan(l)) sum += std::exp(l * inv_t - max_scaled);
    return static_cast<float>(logits[id] * inv_t - max_scaled - std::log(sum));
}

}  // namespace k3
