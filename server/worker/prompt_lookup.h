// Draft tokens for exact speculative decoding by prompt lookup: no second model, just the
// sequence so far (prompt and output). The drafter finds the most recent earlier place where the
// last few tokens occurred and proposes what followed them there. The engine then verifies the
// drafts in one multi-token step and the worker keeps only what the model itself would have
// produced (worker/worker.cpp), so the drafter can only change speed, never output.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace k3::server {

// max_tokens tokens that followed the most recent earlier occurrence of the sequence's last n
// tokens (n = 3, then 2), the run from there continued periodically past the sequence's end; or
// nothing when neither occurs earlier.
std::vector<int32_t> prompt_lookup_draft(std::span<const int32_t> sequence, int max_tokens);

// How many drafts to ask for next: grows while drafts are accepted, shrinks after a rejection,
// and switches drafting off for a while when the measured acceptance is too low to pay for the
// wider verify steps.
class DraftHorizon {
public:
    explicit DraftHorizon(int max_tokens) : max_(max_tokens), horizon_(max_tokens > 0 ? std::min(4, max_tokens) : 0) {}
    // Drafts to ask for before the next step (0: plain decoding this step).
    int next() {
        if (max_ <= 0) return 0;
        if (paused_ > 0) {
            --paused_;
            return 0;
        }
        return horizon_;
    }
    // After verifying `drafted` drafts of which the first `accepted` were kept.
    void observe(int drafted, int accepted);
    uint64_t drafted() const { return drafted_total_; }
    uint64_t accepted() const { return accepted_total_; }

private:
    static constexpr int kWindow = 32;        // drafts per acceptance measurement
    static constexpr double kMinAcceptance = 0.3;
    static constexpr int kPauseSteps = 64;    // plain steps before drafting again

    int max_;
    int horizon_;
    int paused_ = 0;
    int window_drafted_ = 0, window_accepted_ = 0;
    uint64_t drafted_total_ = 0, accepted_total_ = 0;
};

}  // namespace k3::server
