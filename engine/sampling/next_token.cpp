#include "k3/next_token.h"

#include <algorithm>

namespace k3 {

NextToken::NextToken(const NextTokenRules& rules)
    : adjust_(rules.adjustments), grammar_(rules.grammar), sampler_(rules.sampling), end_tokens_(rules.end_tokens) {
    if (grammar_) grammar_->reset();  // from the start, keeping its automaton and masks
}

// Penalties and biases first, then the grammar's mask over the adjusted scores (so a bias can
// never revive a token the grammar refuses), then the draw.
NextToken::Choice NextToken::choose(std::span<const float> logits, int tokens_left) {
    std::span<const float> scores = adjust_.apply(logits);
    if (grammar_) {
        masked_.assign(scores.begin(), scores.end());
        grammar_->mask_logits(masked_, tokens_left);
        scores = masked_;
    }
    Choice c;
    c.id = sampler_.sample(scores);
    // Only possible if the tokenizer cannot spell what the grammar needs next.
    if (grammar_ && !grammar_->accept(c.id)) {
        c.allowed = false;
        return c;
    }
    adjust_.observe(c.id);
    c.ends = std::find(end_tokens_.begin(), end_tokens_.end(), c.id) != end_tokens_.end();
    return c;
}

}  // namespace k3
