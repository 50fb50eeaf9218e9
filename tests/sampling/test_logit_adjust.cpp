// LogitAdjuster (k3/logit_adjust.h): known answers for logit_bias and the two penalties, the
// untouched path (no copy) when nothing is asked, and out-of-range ids ignored.
#include <doctest/doctest.h>

#include <vector>

#include "k3/logit_adjust.h"

using namespace k3;

TEST_CASE("no adjustments: the logits themselves, not a copy") {
    std::vector<float> logits = {1, 2, 3};
    LogitAdjuster a({});
    auto out = a.apply(logits);
    CHECK(out.data() == logits.data());
    a.observe(1);
    CHECK(a.apply(logits).data() == logits.data());
}

TEST_CASE("bias is added; penalties subtract presence once and frequency per occurrence") {
    std::vector<float> logits = {0, 0, 0, 0};
    LogitAdjustments adj;
    adj.presence_penalty = 0.5f;
    adj.frequency_penalty = 0.25f;
    adj.bias = {{3, 2.0f}, {99, 7.0f}};  // 99 is outside the vocabulary: ignored
    LogitAdjuster a(adj);
    auto first = a.apply(logits);
    CHECK(std::vector<float>(first.begin(), first.end()) == std::vector<float>{0, 0, 0, 2});
    a.observe(1);
    a.observe(1);
    a.observe(3);
    auto next = a.apply(logits);
    // id 1: -(0.5 + 2 * 0.25); id 3: 2 - (0.5 + 0.25)
    CHECK(std::vector<float>(next.begin(), next.end()) == std::vector<float>{0, -1.0f, 0, 1.25f});
    CHECK(logits == std::vector<float>{0, 0, 0, 0});  // the input is never written
}
