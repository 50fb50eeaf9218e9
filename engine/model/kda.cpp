// Kimi Delta Attention (spec 2.5). The projections run over the whole chunk; the recurrence runs
// token by token (it is sequential), the heads in parallel. Everything a head needs (its conv
// channels, norms, decay, delta-rule steps, head norm and gate, for every token of the chunk)
// is done by one thread, so the result does not depend on the thread count.
#include <cmath>

#include "model/blocks.h"
#include "model/norms.h"

namespace k3 {

namespace {

// Causal depthwise conv of one channel plus SiLU; hist holds the previous K-1 raw inputs,
// oldest first, and is shifted to take `cur`.
inline float conv_silu(const float* w, float* hist, int KH, float cur) {
    float acc = w[KH] * cur;
    for (int j = 0; j < KH; ++j) acc += w[j] * hist[j];
    for (int j = 0; j + 1 < KH; ++j) hist[j] = hist[j + 1];
    if (KH > 0) hist[KH - 1] = cur;
    return acc * sigmoid(acc);
}

}  // namespace

void kda_block(Model& m, const KdaWeights& w, float* state, const float* x, float* out, int T) {
    const ModelConfig& c = m.cfg;
    Activations& a = m.act;
    const Compute& cp = m.compute;
    const int64_t E = c.hidden_size, P = c.kda_width(), D = c.kda_head_dim, H = c.kda_num_heads;
    const int KH = c.short_conv_kernel_size - 1, K = c.short_conv_kernel_size;
    const float lb = c.gate_lower_bound, eps = c.rms_norm_eps, q_scale = 1.0f / std::sqrt(float(D));

    // q, k, v, g = W x  [T][P];  z = W_fb (W_fa x)  [T][P];  b = W_b x  [T][H]
    cp.matmul_bf16_many({{w.q, x, a.kq.data(), P, E}, {w.k, x, a.kk.data(), P, E}, {w.v, x, a.kv.data(), P, E},
                         {w.g, x, a.kg.data(), P, E}, {w.f_a, x, a.kf.data(), D, E}, {w.b, x, a.kb.data(), H, E}},
                        T);
    cp.matmul_bf16(w.f_b, a.kf.data(), a.kz.data(), P, D, T);

    // state: S [H][D][D] | q hist [P][K-1] | k hist | v hist
    float* S = state;
    float* hist_q = state + H * D * D;
    float* hist_k = hist_q + P * KH;
    float* hist_v = hist_k + P * KH;

    // heads are independent for the whole chunk: each thread runs its heads through every token
    cp.parallel_for(H, [&](int64_t h, int) {
        for (int t = 0; t < T; ++t) {
            float* q = a.kda_head.data() + h * 5 * D;  // [D] each
            float* k = q + D;
            float* v = k + D;
            float* alpha = v + D;
            float* o = alpha + D;
            // short conv + SiLU on q, k, v (channels of this head)
            for (int64_t d = 0; d < D; ++d) {
                const int64_t i = h * D + d;
                q[d] = conv_silu(w.conv_q + i * K, hist_q + i * KH, KH, a.kq[t * P + i]);
                k[d] = conv_silu(w.conv_k + i * K, hist_k + i * KH, KH, a.kk[t * P + i]);
                v[d] = conv_silu(w.conv_v + i * K, hist_v + i * KH, KH, a.kv[t * P + i]);
            }
            // L2 norm of q and k; q pre-scaled by 1/sqrt(D)
            l2norm(q, D, kKdaL2NormEps);
            l2norm(k, D, kKdaL2NormEps);
            for (int64_t d = 0; d < D; ++d) q[d] *= q_scale;
            // beta = sigmoid(b_h); alpha_i = exp(lb * sigmoid(exp(A_log[h]) * (z_i + dt_bias_i)))
            const float beta = sigmoid(a.kb[t * H + h]);
            for (int64_t d = 0; d < D; ++d) {
                const int64_t i = h * D + d;
                alpha[d] = std::exp(lb * sigmoid(w.decay_rate[h] * (a.kz[t * P + i] + w.dt_bias[i])));
            }
            // delta rule: decay, read, write, read the output from the updated state
            cp.k.kda_step(S + h * D * D, q, k, v, alpha, beta, o, int(D));
            // head RMSNorm with o_norm, then the sigmoid output gate
            rmsnorm(o, w.o_norm, o, D, eps);
            for (int64_t d = 0; d < D; ++d) a.ko[t * P + h * D + d] = o[d] * sigmoid(a.kg[t * P + h * D + d]);
        }
    });

    // out = W_o o  [T][E]
    cp.matmul_bf16(w.o, a.ko.data(), out, E, P, T);
}

}  // namespace k3
