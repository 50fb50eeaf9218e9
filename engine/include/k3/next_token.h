// The next-token step, one for the daemon's worker and for `k3serve run`: a position's logits
// are adjusted (penalties and biases, k3/logit_adjust.h), masked by the output's grammar when
// it has one (k3/grammar.h), sampled (k3/sampler.h), and the token chosen is told to the
// grammar and to the penalties; the step also says whether that token ends the generation (an
// end token, or an output the grammar holds complete). Turning tokens into text and matching
// stop strings stay with the caller, which knows the output's format (docs/model.md, "Sampling
// and its seed"; docs/architecture.md, "One place for each concept").
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "k3/grammar.h"
#include "k3/logit_adjust.h"
#include "k3/sampler.h"

namespace k3 {

struct NextTokenRules {
    SamplingParams sampling;                  // default: greedy
    LogitAdjustments adjustments;             // default: none (the logits are not copied)
    // Constrained output: the grammar's matcher, compiled beforehand by whoever builds the
    // request (the daemon: on the HTTP thread, so the worker only runs it), reset by the step,
    // which is then its only user until it ends (n choices run one after another). Null = free.
    std::shared_ptr<GrammarMatcher> grammar;
    std::vector<int32_t> end_tokens;          // tokens that end the generation (not its text)
};

class NextToken {
public:
    explicit NextToken(const NextTokenRules& rules);

    struct Choice {
        int32_t id = -1;
        bool allowed = true;  // false: the grammar allows no token here (nothing was changed)
        bool ends = false;    // one of the end tokens
    };
    // The token that follows `logits`. `tokens_left` is how many tokens may still be generated,
    // this one included (a grammar then only allows what it can still complete within them).
    Choice choose(std::span<const float> logits, int tokens_left);

    bool constrained() const { return grammar_ != nullptr; }
    // The grammar holds the output complete and nothing may follow (false when unconstrained).
    bool output_complete() const { return grammar_ && grammar_->finished(); }

private:
    LogitAdjuster adjust_;
    std::shared_ptr<GrammarMatcher> grammar_;
    Sampler sampler_;
    std::vector<int32_t> end_tokens_;
    std::vector<float> masked_;  // the masked scores of one step
};

}  // namespace k3
