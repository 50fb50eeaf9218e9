// How large a prefill pass is and what it costs (docs/performance.md, "Prefill passes"). A pass is
// the tokens the forward pass takes through every layer together, so that each weight is read once
// for all of them. What a token of a pass keeps from the first layer to the last is sized per
// token (PassCost::per_token); every other intermediate is sized per tile of tokens or per group
// of expert rows, whatever the pass. From the config alone, so the memory plan (store) can size
// the pass before the model exists; model/activations.h allocates it.
#pragma once
#include <cstdint>

#include "weights/config.h"

namespace k3 {

// The most tokens a pass may have, whatever the budget (and never more than the context).
inline constexpr int kMaxPassTokens = 1 << 17;

// What a pass takes in memory.
struct PassCost {
    // Bytes one token of a pass keeps between layers: the residual stream and the block
    // snapshots the attention residuals mix ([1 + blocks][E] fp32), the routed experts' latent
    // input [L] and outputs [top-k][L] (kept until the token's weighted sum is taken in top-k
    // order, which keeps a pass's bits those of one token at a time), its choices. The MLA rows
    // the pass writes are the sequence's (kv_bytes_per_position, model/state.h), not the pass's.
    int64_t per_token = 1;
    int64_t tile_token_bytes = 0;  // one token of a tile: attention, KDA, projections, MLPs
    int tile_cap = 1;              // tokens per tile at most
    int64_t expert_row_bytes = 0;  // one (token, choice) row of routed-expert work: input, gate, up
    int64_t rows_cap = 1;          // rows per group at most
    int rows_per_token = 1;        // top-k
    int max_tokens = 1;            // kMaxPassTokens, or the context when smaller

    int tile_tokens(int pass_tokens) const;
    int64_t expert_rows(int pass_tokens) const;
    // One tile's intermediates and one group's expert rows: what does not grow with the pass.
    int64_t fixed_bytes(int pass_tokens) const;
    // Everything a pass of `tokens` takes.
    int64_t bytes(int tokens) const { return fixed_bytes(tokens) + int64_t(tokens) * per_token; }
    // The most tokens a pass within `budget` bytes holds, at most max_tokens; 0 when not one.
    int tokens_within(int64_t budget) const;
};

PassCost pass_cost(const ModelConfig& cfg);

// What a pass takes without a prefill budget (--prefill-mb) and without memory lent to it.
inline constexpr int64_t kDefaultPassBytes = 256ll << 20;

// The pass without a prefill budget: what kDefaultPassBytes holds (at least one token).
int chunk_tokens_for(const ModelConfig& cfg);

}  // namespace k3
