// A prefill chunk's compute by stage (chunk_compute.h). Each block below follows its engine
// function (engine/model/*.cpp) product by product and loop by loop; a change there is a change
// here.
#include "cli/chunk_compute.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace k3::cli {

namespace {

int count_mla(const ModelConfig& c) {
    int n = 0;
    for (int il = 0; il < c.num_hidden_layers; ++il) n += c.is_mla(il) ? 1 : 0;
    return n;
}

}  // namespace

double rate_at(const std::vector<std::pair<int64_t, double>>& by_key, int64_t key) {
    double best = 0, best_gap = INFINITY;
    for (const auto& [k, v] : by_key) {
        const double gap = std::abs(std::log(double(std::max<int64_t>(k, 1))) - std::log(double(std::max<int64_t>(key, 1))));
        if (gap < best_gap) best = v, best_gap = gap;
    }
    return best;
}

double ChunkCompute::total() const { return std::accumulate(seconds.begin(), seconds.end(), 0.0); }

std::vector<std::pair<int64_t, int64_t>> bf16_product_widths(const ModelConfig& c) {
    const int64_t E = c.hidden_size, P = c.kda_width(), D = c.kda_head_dim, H = c.num_attention_heads,
                  QK = c.mla_q_head_dim(), VH = c.v_head_dim, L = c.routed_expert_hidden_size,
                  SI = c.shared_intermediate(), F = c.intermediate_size;
    std::vector<std::pair<int64_t, int64_t>> out;  // (cols, rows)
    auto add = [&](int64_t cols, int64_t rows) {
        if (cols <= 0 || rows <= 0) return;
        for (auto& [k, r] : out)
            if (k == cols) return void(r = std::max(r, rows));
        out.push_back({cols, rows});
    };
    const bool kda = count_mla(c) < c.num_hidden_layers, mla = count_mla(c) > 0;
    const bool dense = c.first_k_dense_replace > 0, moe = c.first_k_dense_replace < c.num_hidden_layers;
    if (kda) add(E, P), add(D, P), add(P, E);
    if (mla) add(E, std::max<int64_t>(c.q_lora_rank, H * VH)), add(c.q_lora_rank, H * QK), add(H * VH, E);
    if (dense) add(E, F), add(F, E);
    if (moe) add(E, std::max<int64_t>({c.num_experts, L, SI})), add(L, E), add(SI, E);
    return out;
}

int64_t tokens_per_expert(const ModelConfig& c, int64_t T) {
    if (c.num_experts <= 0) return 1;
    return std::max<int64_t>(1, std::llround(double(T) * c.num_experts_per_token / c.num_experts));
}

ChunkCompute chunk_compute(const ModelConfig& c, const ModelRates& r, int64_t T, int64_t p0, int experts_per_batch) {
    ChunkCompute out;
    const TokenWork& w = r.work;
    const double t = double(T);
    const int64_t E = c.hidden_size, P = c.kda_width(), D = c.kda_head_dim, HK = c.kda_num_heads,
                  H = c.num_attention_heads, QK = c.mla_q_head_dim(), VH = c.v_head_dim, QL = c.q_lora_rank,
                  KVL = c.kv_lora_rank, KV = c.mla_kv_latent_dim(), L = c.routed_expert_hidden_size,
                  I = c.moe_intermediate_size, SI = c.shared_intermediate(), F = c.intermediate_size,
                  NE = c.num_experts, K = c.num_experts_per_token;
    // `items` work items of `unit` seconds each (one thread's time) over the threads
    const double speedup = std::clamp(w.parallel_speedup, 1.0, double(std::max(1, w.threads)));
    auto spread = [&](double items, double unit) { return items * unit / std::max(1.0, std::min(speedup, items)); };
    // seconds of T tokens through a bf16 product [rows][cols], its blocks of rows over the threads
    auto bf16 = [&](int64_t rows, int64_t cols) {
        const double rate = rate_at(r.bf16_gflops, cols) * 1e9;
        return rate > 0 ? 2.0 * t * double(rows) * double(cols) / rate / speedup : 0.0;
    };
    // SiTU-GLU over n elements, in chunks of 1024 over the threads (compute.h)
    auto situ = [&](double n) { return spread(std::ceil(n / 1024), 1024 * w.situ_seconds); };
    auto charge = [&](ForwardStage s, double seconds, int joins) {
        out.seconds[size_t(s)] += seconds + joins * w.join_seconds;
        out.joins += joins;
    };
    // causal (query, key) pairs of the chunk: positions p0 .. p0 + T - 1 see p0 + 1 .. p0 + T keys
    const double pairs = t * double(p0) + t * (t + 1) / 2;
    // (at the chunk's mean keys: rows past the caches come at the memory's rate)
    const double keys = double(p0) + (t + 1) / 2;
    const double attention_rate = (r.attention_gflops_by_keys.empty() ? r.attention_gflops
                                                                      : rate_at(r.attention_gflops_by_keys, int64_t(keys))) *
                                  1e9 * speedup;  // tiles over the threads
    // the routed experts a chunk's tokens choose, in batches of the store's size
    const double union_experts = NE > 0 ? double(NE) * (1 - std::pow(1 - double(K) / double(NE), t)) : 0;
    const int batches = int(std::ceil(union_experts / std::max(1, experts_per_batch)));
    const double expert_rate = rate_at(r.expert_gflops, tokens_per_expert(c, T)) * 1e9 * speedup;  // experts over the threads

    int n_blocks = 0;
    for (int il = 0; il < c.num_hidden_layers; ++il) {
        // model.cpp: the pre-attention mix (a copy before the first block), a block's snapshot,
        // the norms, the two residual adds and the pre-MLP mix
        const bool block_start = il % c.attn_res_block_size == 0;
        double mix = n_blocks > 0 ? spread(t, (n_blocks + 1) * w.mix_source_seconds) : t * double(E) * w.add_seconds;
        int mix_joins = n_blocks > 0 ? 1 : 0;
        if (block_start) mix += t * double(E) * w.add_seconds, ++n_blocks;
        mix += spread(t, (n_blocks + 1) * w.mix_source_seconds) + 2 * t * double(E) * w.add_seconds;
        charge(ForwardStage::ResidualMix, mix, mix_joins + 1);
        charge(ForwardStage::Norms, 2 * spread(t, w.norm_seconds), 2);

        if (c.is_mla(il)) {  // mla.cpp
            const double products = bf16(QL, E) + bf16(KV, E) + (c.mla_use_output_gate ? bf16(H * VH, E) : 0.0) +
                                    bf16(H * QK, QL) + bf16(E, H * VH);
            // (the low-rank and latent norms run on the forward pass's thread)
            const double norms = t * double(QL + KVL) / double(E) * w.norm_seconds;
            charge(ForwardStage::MlaProducts, products + norms, 3);
            const double attention = attention_rate > 0 ? double(H) * pairs * 2.0 * double(KV + KVL) / attention_rate : 0;
            out.attention_seconds += attention;
            charge(ForwardStage::MlaAttention, spread(t * double(H), w.mla_head_seconds) + attention, 2);
        } else {  // kda.cpp: each head through the chunk's tokens on one thread
            charge(ForwardStage::KdaProducts, bf16(4 * P + D + HK, E) + bf16(P, D) + bf16(E, P), 3);
            charge(ForwardStage::KdaHeads, spread(double(HK), t * w.kda_head_seconds), 1);
        }

        if (c.is_dense(il)) {  // dense_mlp.cpp
            charge(ForwardStage::DenseMlp, bf16(2 * F, E) + bf16(E, F) + situ(t * double(F)), 3);
        } else {  // moe.cpp
            const bool shared = SI > 0;
            const double products = bf16(NE + L + 2 * SI, E) + bf16(E, L) + (shared ? bf16(E, SI) : 0.0) +
                                    spread(t, w.combine_seconds) + (shared ? situ(t * double(SI)) : 0.0) +
                                    (shared ? t * double(E) * w.add_seconds : 0.0);
            charge(ForwardStage::MoeProducts, products, shared ? 5 : 3);
            charge(ForwardStage::Routing, t * w.route_seconds, 0);
            const double experts = expert_rate > 0 ? 2.0 * t * double(K) * 3.0 * double(I) * double(L) / expert_rate : 0;
            charge(ForwardStage::Experts, experts + situ(t * double(K * I)), 3 * batches);
        }
    }
    // the model-level mix, norm and lm_head for the chunk's last row: [V][E] bf16 swept once
    if (r.mem_gbps > 0) charge(ForwardStage::Output, 2.0 * double(c.vocab_size) * double(E) / (r.mem_gbps * 1e9), 2);
    return out;
}

}  // namespace k3::cli
