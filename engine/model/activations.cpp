// Activations allocation (activations.h): every buffer sized from the config once.
#include "model/activations.h"

#include <algorithm>

namespace k3 {

namespace {
ZeroedArray<float> zeros(int64_t n) { return ZeroedArray<float>(size_t(std::max<int64_t>(n, 0))); }
}  // namespace

Activations::Activations(const ModelConfig& c, int T) : max_tokens(T) {
    const int64_t E = c.hidden_size, P = c.kda_width(), D = c.kda_head_dim, H = c.kda_num_heads;
    const int64_t MH = c.num_attention_heads, QK = c.mla_q_head_dim(), KV = c.mla_kv_latent_dim();
    const int64_t L = c.routed_expert_hidden_size, I = c.moe_intermediate_size, K = c.num_experts_per_token;
    n_blocks_max = (c.num_hidden_layers + c.attn_res_block_size - 1) / c.attn_res_block_size;

    pref = zeros(T * E);
    h = zeros(T * E);
    x = zeros(T * E);
    out = zeros(T * E);
    blocks = zeros(T * n_blocks_max * E);

    kq = zeros(T * P), kk = zeros(T * P), kv = zeros(T * P), kg = zeros(T * P), kz = zeros(T * P);
    kf = zeros(T * D);
    kb = zeros(T * H);
    ko = zeros(T * P);
    kda_head = zeros(H * 5 * D);

    mq_a = zeros(T * c.q_lora_rank);
    mq = zeros(T * MH * QK);
    mkv = zeros(T * KV);
    mg = zeros(T * MH * c.v_head_dim);
    mo = zeros(T * MH * c.v_head_dim);
    mq_abs = zeros(T * MH * KV);
    mctx = zeros(T * MH * c.kv_lora_rank);

    dgate = zeros(T * c.intermediate_size);
    dup = zeros(T * c.intermediate_size);

    router = zeros(T * c.num_experts);
    sel.assign(size_t(T * K), 0);
    sel_w = zeros(T * K);
    lat = zeros(T * L);
    lat_acc = zeros(T * L);
    n_assigned.assign(size_t(c.num_experts), 0);
    first_slot.assign(size_t(c.num_experts), 0);
    union_ids.assign(size_t(c.num_experts), 0);
    slot_of.assign(size_t(T * K), 0);
    ex_in = zeros(T * K * L);
    ex_gate = zeros(T * K * I);
    ex_up = zeros(T * K * I);
    ex_out = zeros(T * K * L);
    expert_runs.assign(size_t(c.num_experts), nullptr);
    sgate = zeros(T * c.shared_intermediate());
    sup = zeros(T * c.shared_intermediate());
    sout = zeros(T * E);
    cursor.assign(size_t(c.num_experts), 0);
    router_c = zeros(c.num_experts);

    ahead_scores = zeros(int64_t(kLookaheadRows) * c.num_experts);
    ahead_sel.assign(size_t(kLookaheadRows) * size_t(K), 0);
    ahead_w = zeros(int64_t(kLookaheadRows) * K);
    ahead_union.assign(size_t(c.num_experts), 0);

    final_h = zeros(T * E);
    seq_of.assign(size_t(T), 0);
}

}  // namespace k3
