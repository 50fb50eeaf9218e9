#include "worker/prompt_lookup.h"

#include <algorithm>

namespace k3::server {

std::vector<int32_t> prompt_lookup_draft(std::span<const int32_t> seq, int max_tokens) {
    const size_t L = seq.size();
    if (max_tokens <= 0) return {};
    for (size_t n : {size_t(3), size_t(2)}) {
        if (L < n + 1) continue;
        const std::span<const int32_t> key = seq.subspan(L - n, n);
        // the latest start p < L - n where seq[p, p + n) == key
        for (size_t p = L - n; p-- > 0;) {
            if (!std::equal(key.begin(), key.end(), seq.begin() + std::ptrdiff_t(p))) continue;
            // What followed, continued past the end as a copy of itself (as LZ77 copies an
            // overlapping match): in a cycle of period q the latest match is only q tokens
            // back, and the cycle's own continuation is the best guess for the tokens after it.
            const size_t from = p + n;
            std::vector<int32_t> draft;
            draft.reserve(size_t(max_tokens));
            for (size_t at = from; draft.size() < size_t(max_tokens); ++at)
                draft.push_back(at < L ? seq[at] : draft[at - L]);
            return draft;
        }
    }
    return {};
}

void DraftHorizon::observe(int drafted, int accepted) {
    if (drafted <= 0) return;
    drafted_total_ += uint64_t(drafted);
    accepted_total_ += uint64_t(accepted);
    horizon_ = accepted == drafted ? std::min(max_, horizon_ + 2) : std::max(1, accepted + 1);
    window_drafted_ += drafted;
    window_accepted_ += accepted;
    if (window_drafted_ >= kWindow) {
        if (double(window_accepted_) < kMinAcceptance * double(window_drafted_)) paused_ = kPauseSteps;
        window_drafted_ = window_accepted_ = 0;
    }
}

}  // namespace k3::server
