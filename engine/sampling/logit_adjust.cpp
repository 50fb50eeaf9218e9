#include "k3/logit_adjust.h"

namespace k3 {

std::span<const float> LogitAdjuster::apply(std::span<const float> logits) {
    if (!a_.any()) return logits;
    scratch_.assign(logits.begin(), logits.end());
    for (const auto& [id, b] : a_.bias)
        if (id >= 0 && size_t(id) < scratch_.size()) scratch_[size_t(id)] += b;
    for (const auto& [id, n] : counts_)
        if (id >= 0 && size_t(id) < scratch_.size())
            scratch_[size_t(id)] -= a_.presence_penalty + a_.frequency_penalty * float(n);
    return scratch_;
}

void LogitAdjuster::observe(int32_t id) {
    if (a_.presence_penalty != 0 || a_.frequency_penalty != 0) ++counts_[id];
}

}  // namespace k3
