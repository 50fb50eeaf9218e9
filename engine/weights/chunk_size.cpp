// Forward chunk sizes from the config (chunk_size.h).
#include "weights/chunk_size.h"

#include <algorithm>

namespace k3 {

namespace {

// Floats one token of a chunk occupies across the Activations buffers.
int64_t floats_per_token(const ModelConfig& c) {
    const int64_t E = c.hidden_size, P = c.kda_width(), MH = c.num_attention_heads, KV = c.mla_kv_latent_dim();
    const int64_t L = c.routed_expert_hidden_size, I = c.moe_intermediate_size, K = c.num_experts_per_token;
    const int64_t nb = (c.num_hidden_layers + c.attn_res_block_size - 1) / c.attn_res_block_size;
    return E * (5 + nb) + 6 * P + c.kda_head_dim + c.kda_num_heads + c.q_lora_rank + MH * c.mla_q_head_dim() + KV +
           2 * MH * c.v_head_dim + MH * KV + MH * c.kv_lora_rank + 2 * c.intermediate_size + c.num_experts +
           2 * K + 2 * L + K * (2 * L + 2 * I) + 2 * c.shared_intermediate();
}

}  // namespace

int64_t activation_bytes_per_token(const ModelConfig& c) {
    return int64_t(sizeof(float)) * std::max<int64_t>(1, floats_per_token(c));
}

int chunk_tokens_for(const ModelConfig& c) {
    constexpr int64_t kBudgetBytes = 256ll << 20;
    return int(std::clamp<int64_t>(kBudgetBytes / activation_bytes_per_token(c), 16, 256));
}

}  // namespace k3
