// Timing the forward pass's work that is not a weight product (token_work.h). Each figure runs
// the engine's own function (attn_res_mix, rmsnorm, kda_head_token, select_experts, the
// kernels' matvec_transposed_bf16 (MLA's query absorption), matvec and situ_glu) on 64 tokens of
// seeded data at the model's widths, on one thread: timed inside a parallel region, 64 tokens'
// work is less than one join on a loaded machine (0.4 ms at load 13), and the join is its own
// figure.
#include "cli/token_work.h"
#include "cli/timed_passes.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "model/blocks.h"
#include "model/compute.h"
#include "model/norms.h"

namespace k3::cli {

namespace {

constexpr int kTokens = 64;

// Seconds of one call of `pass`, over about `seconds`.
template <class F>
double seconds_per_pass(double seconds, F&& pass) {
    return 1 / passes_per_second(seconds, pass);
}

std::vector<float> seeded(size_t n, std::mt19937& rng, float sd = 0.5f) {
    std::normal_distribution<float> d(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

std::vector<uint16_t> seeded_bf16(size_t n, std::mt19937& rng, float sd) {
    std::vector<uint16_t> v(n);
    std::normal_distribution<float> d(0.0f, sd);
    for (auto& w : v) w = f32_to_bf16(d(rng));
    return v;
}

}  // namespace

double measure_join_seconds(int threads, double seconds) {
    Compute cp(select_kernels(), std::max(1, threads));
    return seconds_per_pass(seconds, [&] { cp.parallel_for(cp.nth, [](int64_t, int) {}); });
}

TokenWork measure_token_work(const ModelConfig& c, int threads, double seconds) {
    TokenWork r;
    r.threads = std::max(1, threads);
    r.join_seconds = measure_join_seconds(threads, seconds / 10);
    Compute cp(select_kernels(), 1);
    std::mt19937 rng(5);
    const double each = seconds / 10;
    const int64_t E = std::max(16, c.hidden_size);
    const float eps = c.rms_norm_eps;

    // attention-residual mix over 4 sources, and the layer-input RMSNorm
    {
        constexpr int kSources = 4;
        const std::vector<float> src = seeded(size_t(kTokens * (kSources + 1) * E), rng), fold = seeded(size_t(E), rng);
        std::vector<float> out(size_t(kTokens * E));
        r.mix_source_seconds = seconds_per_pass(each, [&] {
            for (int64_t t = 0; t < kTokens; ++t) {
                const float* s[kSources];
                for (int i = 0; i < kSources; ++i) s[i] = &src[size_t((t * kSources + i) * E)];
                attn_res_mix(s, kSources, fold.data(), eps, E, &out[size_t(t * E)]);
            }
        }) / (kTokens * kSources);
        // the same mixes over 16 times the tokens, on the threads as mix_residuals spreads them
        if (r.threads > 1) {
            const double one = seconds_per_pass(each, [&] {
                for (int rep = 0; rep < 16; ++rep)
                    for (int64_t t = 0; t < kTokens; ++t) {
                        const float* s[kSources];
                        for (int i = 0; i < kSources; ++i) s[i] = &src[size_t((t * kSources + i) * E)];
                        attn_res_mix(s, kSources, fold.data(), eps, E, &out[size_t(t * E)]);
                    }
            });
            Compute pool(select_kernels(), r.threads);
            std::vector<float> outs(size_t(16 * kTokens * E));
            const double many = seconds_per_pass(each, [&] {
                pool.parallel_for(16 * kTokens, [&](int64_t i, int) {
                    const int64_t t = i % kTokens;
                    const float* s[kSources];
                    for (int j = 0; j < kSources; ++j) s[j] = &src[size_t((t * kSources + j) * E)];
                    attn_res_mix(s, kSources, fold.data(), eps, E, &outs[size_t(i * E)]);
                });
            });
            r.parallel_speedup = std::clamp(one / std::max(many - r.join_seconds, 1e-9), 1.0, double(r.threads));
        }
        r.norm_seconds = seconds_per_pass(each, [&] {
            for (int64_t t = 0; t < kTokens; ++t) rmsnorm(&src[size_t(t * E)], fold.data(), &out[size_t(t * E)], E, eps);
        }) / kTokens;
        // a residual add: pref = pref + out over the chunk, on the forward pass's thread
        std::vector<float> pref(out.size(), 0.0f);
        r.add_seconds = seconds_per_pass(each, [&] {
            for (size_t i = 0; i < pref.size(); ++i) pref[i] = pref[i] + out[i] * 1e-3f;
        }) / double(pref.size());
    }

    // KDA: every head through 64 tokens of its own inputs (kda_block)
    if (c.kda_num_heads > 0 && c.kda_head_dim > 0 && c.kda_head_dim <= kKdaMaxHeadDim) {
        const int64_t H = c.kda_num_heads, D = c.kda_head_dim, P = c.kda_width();
        const int KH = std::max(0, c.short_conv_kernel_size - 1), K = KH + 1;
        const std::vector<float> conv = seeded(size_t(P * K), rng), in = seeded(size_t(kTokens * (4 * P + H)), rng),
                                 gate = seeded(size_t(kTokens * P), rng), o_norm(size_t(D), 1.0f),
                                 dt_bias = seeded(size_t(P), rng, 0.1f);
        const std::vector<float> decay(size_t(H), 1.0f);
        KdaWeights w{};
        w.conv_q = w.conv_k = w.conv_v = conv.data();
        w.decay_rate = decay.data();
        w.dt_bias = dt_bias.data();
        w.o_norm = o_norm.data();
        std::vector<float> state = seeded(size_t(H * D * D + 3 * P * KH), rng, 0.01f);
        std::vector<float> scratch(static_cast<size_t>(5 * D)), o_all(size_t(kTokens * P));
        const int64_t row = 4 * P + H;
        r.kda_head_seconds = seconds_per_pass(each, [&] {
            for (int64_t h = 0; h < H; ++h) {
                float* s = scratch.data();
                float* o = s + 4 * D;
                for (int t = 0; t < kTokens; ++t) {
                    const float* x = &in[size_t(t * row)];
                    kda_head_token(cp, c, w, h, state.data(), x, x + P, x + 2 * P, x + 3 * P, x + 4 * P, s);
                    rmsnorm(o, w.o_norm, o, D, eps);
                    for (int64_t d = 0; d < D; ++d) o_all[size_t(t * P + h * D + d)] = o[d] * sigmoid(gate[size_t(t * P + h * D + d)]);
                }
            }
        }) / double(kTokens * H);
    }

    // routing: sigmoid over the experts, top-k, the token's latent row copied to each expert's rows
    if (c.num_experts > 0 && c.num_experts_per_token > 0) {
        const int NE = c.num_experts, K = c.num_experts_per_token;
        const int64_t L = std::max(1, c.routed_expert_hidden_size);
        const std::vector<float> logits = seeded(size_t(kTokens * NE), rng, 2.0f), bias = seeded(size_t(NE), rng, 0.1f),
                                 lat = seeded(size_t(kTokens * L), rng);
        std::vector<float> s(static_cast<size_t>(NE)), corrected(static_cast<size_t>(NE)), weight(static_cast<size_t>(kTokens * K)),
            rows(static_cast<size_t>(kTokens * K * L));
        std::vector<int32_t> idx(size_t(kTokens * K));
        r.route_seconds = seconds_per_pass(each, [&] {
            for (int t = 0; t < kTokens; ++t) {
                for (int e = 0; e < NE; ++e) s[size_t(e)] = sigmoid(logits[size_t(t * NE + e)]);
                select_experts(s.data(), bias.data(), NE, K, c.moe_renormalize, c.routed_scaling_factor, corrected.data(),
                               &idx[size_t(t * K)], &weight[size_t(t * K)]);
            }
            for (int i = 0; i < kTokens * K; ++i) std::copy_n(&lat[size_t(i / K * L)], L, &rows[size_t(i * L)]);
        }) / kTokens;
        // the weighted sum of a token's K expert rows and its latent norm
        std::vector<float> acc(size_t(kTokens * L));
        const std::vector<float> norm_w(size_t(L), 1.0f);
        r.combine_seconds = seconds_per_pass(each, [&] {
            for (int64_t t = 0; t < kTokens; ++t) {
                float* a = &acc[size_t(t * L)];
                std::fill(a, a + L, 0.0f);
                for (int j = 0; j < K; ++j) {
                    const float wj = weight[size_t(t * K + j)];
                    const float* e = &rows[size_t((t * K + j) * L)];
                    for (int64_t i = 0; i < L; ++i) a[i] += wj * e[i];
                }
                if (c.latent_moe_use_norm) rmsnorm(a, norm_w.data(), a, L, eps);
            }
        }) / kTokens;
    }

    // MLA per (token, head): the absorbed query, the value row from the mixed latent, the gate
    if (c.num_attention_heads > 0 && c.kv_lora_rank > 0) {
        const int64_t H = c.num_attention_heads, NOPE = c.qk_nope_head_dim, VH = c.v_head_dim, KVL = c.kv_lora_rank;
        const std::vector<uint16_t> kv_b = seeded_bf16(size_t(H * (NOPE + VH) * KVL), rng, 0.05f);
        const std::vector<float> q = seeded(size_t(kTokens * H * std::max<int64_t>(NOPE, 1)), rng),
                                 ctx = seeded(size_t(kTokens * H * KVL), rng), g = seeded(size_t(kTokens * H * VH), rng);
        std::vector<float> q_abs(size_t(kTokens * H * KVL)), o(size_t(kTokens * H * VH)), c_i(static_cast<size_t>(KVL));
        r.mla_head_seconds = seconds_per_pass(each, [&] {
            for (int64_t item = 0; item < kTokens * H; ++item) {
                const int64_t h = item % H;
                const uint16_t* W = &kv_b[size_t(h * (NOPE + VH) * KVL)];
                cp.k.matvec_transposed_bf16(W, &q[size_t(item * NOPE)], &q_abs[size_t(item * KVL)], NOPE, KVL);
                float* ci = c_i.data();
                for (int64_t j = 0; j < KVL; ++j) ci[j] = ctx[size_t(item * KVL + j)] / 1.5f;
                float* oi = &o[size_t(item * VH)];
                cp.k.matvec_bf16(W + NOPE * KVL, ci, oi, VH, KVL);
                if (c.mla_use_output_gate)
                    for (int64_t j = 0; j < VH; ++j) oi[j] *= sigmoid(g[size_t(item * VH + j)]);
            }
        }) / double(kTokens * H);
    }

    // SiTU-GLU over a chunk's gates
    {
        const int64_t n = kTokens * std::max<int64_t>({c.intermediate_size, c.shared_intermediate(), 1024});
        std::vector<float> g = seeded(size_t(n), rng), u = seeded(size_t(n), rng);
        const std::vector<float> g0 = g;
        r.situ_seconds = seconds_per_pass(each, [&] {
            std::copy(g0.begin(), g0.end(), g.begin());  // in place: start from the same gates each pass
            cp.k.situ_glu(g.data(), u.data(), n, c.activation_situ_beta, c.activation_situ_linear_beta);
        }) / double(n);
    }
    return r;
}

}  // namespace k3::cli
