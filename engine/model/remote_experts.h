// Routed experts computed by other processes: expert parallelism (docs/operations.md "Several
// machines", docs/architecture.md "Expert parallelism"). The MoE block hands over the rows routed
// to experts this process does not own (the pass's latent inputs and which token each row is)
// and gets back each row's expert output, so it can sum every token's experts in the same order
// as when it computed them all itself: the bits do not depend on how many processes there are.
// engine/parallel/ implements it over MPI.
#pragma once
#include <cstdint>
#include <span>

#include "k3/status.h"

namespace k3 {

class RemoteExperts {
public:
    virtual ~RemoteExperts() = default;

    // Starts layer il's exchange for a pass of `tokens` tokens whose latent inputs are `latent`
    // [tokens][width]: `experts` (ascending, none of them this process's) with counts[e] rows
    // each; row i of them, in expert order, is the input of token row_tokens[i]. Their outputs
    // are to land in the same order in `out` [rows][width], which must stay untouched (and
    // `latent` and `row_tokens` unchanged) until finish().
    // A failed rank (dead, hung, unable to read its experts) makes this and every later call
    // Unavailable, naming the rank.
    virtual Status start(int il, std::span<const int32_t> experts, const int32_t* counts, const int32_t* row_tokens,
                         const float* latent, int tokens, float* out, int64_t width) = 0;
    // Waits (with a deadline) until every row of the started exchange is back in `out`.
    virtual Status finish() = 0;
};

}  // namespace k3
