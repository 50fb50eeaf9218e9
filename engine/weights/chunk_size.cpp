// Prefill pass sizes from the config (chunk_size.h).
#include "weights/chunk_size.h"

#include <algorithm>

namespace k3 {

namespace {

// A tile's intermediates and a group's expert rows are each kept near this.
constexpr int64_t kTileBudgetBytes = 32ll << 20;

}  // namespace

PassCost pass_cost(const ModelConfig& c) {
    const int64_t E = c.hidden_size, P = c.kda_width(), MH = c.num_attention_heads, KV = c.mla_kv_latent_dim();
    const int64_t L = c.routed_expert_hidden_size, K = c.num_experts_per_token;
    const int64_t n_blocks = (c.num_hidden_layers + c.attn_res_block_size - 1) / c.attn_res_block_size;
    PassCost p;
    // pref, blocks, lat, ex_out, sel_w (floats); sel, slot_of, slot_token (ints)
    p.per_token = int64_t(sizeof(float)) * std::max<int64_t>(1, E * (1 + n_blocks) + L + K * L + K + 3 * K);
    // Activations' per-tile arrays: h, x, out, sout, final_h; KDA; MLA; dense MLP; router,
    // lat_acc, shared gate and up; seq_of
    p.tile_token_bytes =
        int64_t(sizeof(float)) *
        (5 * E + 6 * P + c.kda_head_dim + c.kda_num_heads + c.q_lora_rank + MH * c.mla_q_head_dim() + KV +
         2 * MH * c.v_head_dim + MH * KV + MH * c.kv_lora_rank + 2 * c.intermediate_size + c.num_experts + L +
         2 * c.shared_intermediate() + 1);
    p.tile_cap = int(std::clamp<int64_t>(kTileBudgetBytes / std::max<int64_t>(1, p.tile_token_bytes), 16, 256));
    p.expert_row_bytes = int64_t(sizeof(float)) * (L + 2 * c.moe_intermediate_size);
    p.rows_cap = std::clamp<int64_t>(kTileBudgetBytes / std::max<int64_t>(1, p.expert_row_bytes), 256, 4096);
    p.rows_per_token = std::max<int>(1, c.num_experts_per_token);
    p.max_tokens = std::max(1, std::min(kMaxPassTokens, c.max_position_embeddings > 0 ? c.max_position_embeddings
                                                                                      : kMaxPassTokens));
    return p;
}

int PassCost::tile_tokens(int pass_tokens) const { return std::max(1, std::min(tile_cap, pass_tokens)); }

int64_t PassCost::expert_rows(int pass_tokens) const {
    return std::max<int64_t>(1, std::min<int64_t>(rows_cap, int64_t(pass_tokens) * rows_per_token));
}

int64_t PassCost::fixed_bytes(int pass_tokens) const {
    return int64_t(tile_tokens(pass_tokens)) * tile_token_bytes + expert_rows(pass_tokens) * expert_row_bytes;
}

int PassCost::tokens_within(int64_t budget) const {
    // beyond a tile and a group the fixed part stops growing: count it at max_tokens, then take
    // what a smaller pass's smaller fixed part frees
    int n = int(std::clamp<int64_t>((budget - fixed_bytes(max_tokens)) / std::max<int64_t>(1, per_token), 0, max_tokens));
    while (n < max_tokens && bytes(n + 1) <= budget) ++n;
    return n;
}

int chunk_tokens_for(const ModelConfig& c) { return std::max(1, pass_cost(c).tokens_within(kDefaultPassBytes)); }

}  // namespace k3
