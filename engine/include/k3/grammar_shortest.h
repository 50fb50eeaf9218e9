// The length of a grammar's shortest output, for refusing up front a request whose output limit
// cannot hold it (a required tool call under a small max_tokens: docs/api.md, "Tool calling").
#pragma once
#include "k3/grammar.h"

namespace k3 {

// Fewest output symbols (bytes and control tokens) of a complete output of `grammar`. Each
// symbol is at most one token, and GrammarMatcher::mask_logits completes the output within any
// budget of at least this many tokens, so this is the output limit that always suffices.
int shortest_output(const Grammar& grammar);

}  // namespace k3
