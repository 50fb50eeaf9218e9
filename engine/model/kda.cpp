// Kimi Delta Attention (docs/model.md "Kimi Delta Attention"). The projections run over the whole
// chunk; the recurrence runs token by token (it is sequential), the heads in parallel. Everything a
// head needs (its conv channels, norms, decay, delta-rule steps, head norm and gate, for every
// token of the chunk) is done by one thread, so the result does not depend on the thread count.
#include <algorithm>
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

// Shared by the forward pass and the speculative replay, so both give the same state bits.
void kda_head_token(const Compute& cp, const ModelConfig& c, const KdaWeights& w, int64_t h, float* state,
                    const float* kq, const float* kk, const float* kv, const float* kz, const float* kb,
                    float* scratch) {
    const int64_t P = c.kda_width(), D = c.kda_head_dim, H = c.kda_num_heads;
    const int KH = c.short_conv_kernel_size - 1, K = c.short_conv_kernel_size;
    const float lb = c.gate_lower_bound, q_scale = 1.0f / std::sqrt(float(D));
    // state: S [H][D][D] | q hist [P][K-1] | k hist | v hist
    float* S = state;
    float* hist_q = S + H * D * D;
    float* hist_k = hist_q + P * KH;
    float* hist_v = hist_k + P * KH;
    float* q = scratch;  // [D] each
    float* k = q + D;
    float* v = k + D;
    float* alpha = v + D;
    float* o = alpha + D;
    // short conv + SiLU on q, k, v (channels of this head)
    for (int64_t d = 0; d < D; ++d) {
        const int64_t i = h * D + d;
        q[d] = conv_silu(w.conv_q + i * K, hist_q + i * KH, KH, kq[i]);
        k[d] = conv_silu(w.conv_k + i * K, hist_k + i * KH, KH, kk[i]);
        v[d] = conv_silu(w.conv_v + i * K, hist_v + i * KH, KH, kv[i]);
    }
    // L2 norm of q and k; q pre-scaled by 1/sqrt(D)
    l2norm(q, D, kKdaL2NormEps);
    l2norm(k, D, kKdaL2NormEps);
    for (int64_t d = 0; d < D; ++d) q[d] *= q_scale;
    // beta = sigmoid(b_h); alpha_i = exp(lb * sigmoid(exp(A_log[h]) * (z_i + dt_bias_i)))
    const float beta = sigmoid(kb[h]);
    for (int64_t d = 0; d < D; ++d) {
        const int64_t i = h * D + d;
        alpha[d] = std::exp(lb * sigmoid(w.decay_rate[h] * (kz[i] + w.dt_bias[i])));
    }
    // delta rule: decay, read, write, read the output from the updated state
    cp.k.kda_step(S + h * D * D, q, k, v, alpha, beta, o, int(D));
}

void kda_block(Model& m, const KdaWeights& w, int il, std::span<const SeqSpan> seqs, const float* x, float* out,
               int T) {
    const ModelConfig& c = m.cfg;
    Activations& a = m.act;
    const Compute& cp = m.compute;
    const int64_t E = c.hidden_size, P = c.kda_width(), D = c.kda_head_dim, H = c.kda_num_heads;
    const float eps = c.rms_norm_eps;
    StageClock clock(m.stage_seconds, ForwardStage::KdaProducts);

    // q, k, v, g = W x  [T][P];  z = W_fb (W_fa x)  [T][P];  b = W_b x  [T][H]
    cp.matmul_bf16_many({{w.q, x, a.kq.data(), P, E}, {w.k, x, a.kk.data(), P, E}, {w.v, x, a.kv.data(), P, E},
                         {w.g, x, a.kg.data(), P, E}, {w.f_a, x, a.kf.data(), D, E}, {w.b, x, a.kb.data(), H, E}},
                        T);
    cp.matmul_bf16(w.f_b, a.kf.data(), a.kz.data(), P, D, T);

    // a sequence verifying drafts keeps its recurrence inputs (SequenceState::capture), and
    // kda_replay the layer's small vectors (they stay in Model::vectors; matrices are not used)
    for (const SeqSpan& sq : seqs)
        if (sq.st->capture) {
            m.replay_weights[size_t(il)] = w;
            // (a step longer than a tile goes in parts: this part's rows start where it does)
            float* dst = sq.st->captured_inputs(il) + size_t(sq.pos0 - sq.st->n_past) * size_t(4 * P + H);
            for (int t = sq.t0; t < sq.t0 + sq.n; ++t, dst += 4 * P + H) {
                std::copy_n(&a.kq[t * P], P, dst);
                std::copy_n(&a.kk[t * P], P, dst + P);
                std::copy_n(&a.kv[t * P], P, dst + 2 * P);
                std::copy_n(&a.kz[t * P], P, dst + 3 * P);
                std::copy_n(&a.kb[t * H], H, dst + 4 * P);
            }
        }

    // heads (and sequences) are independent for the whole chunk: each work item runs one head
    // of one sequence through that sequence's tokens
    clock.next(ForwardStage::KdaHeads);
    cp.parallel_for(int64_t(seqs.size()) * H, [&](int64_t item, int thread) {
        const SeqSpan& sq = seqs[size_t(item / H)];
        const int64_t h = item % H;
        float* scratch = a.kda_head.data() + thread * 5 * D;  // this thread's q, k, v, alpha, o
        float* o = scratch + 4 * D;
        for (int t = sq.t0; t < sq.t0 + sq.n; ++t) {
            kda_head_token(cp, c, w, h, sq.st->kda_state(il), &a.kq[t * P], &a.kk[t * P], &a.kv[t * P],
                           &a.kz[t * P], &a.kb[t * H], scratch);
            // head RMSNorm with o_norm, then the sigmoid output gate
            rmsnorm(o, w.o_norm, o, D, eps);
            for (int64_t d = 0; d < D; ++d) a.ko[t * P + h * D + d] = o[d] * sigmoid(a.kg[t * P + h * D + d]);
        }
    });

    // out = W_o o  [T][E]
    clock.next(ForwardStage::KdaProducts);
    cp.matmul_bf16(w.o, a.ko.data(), out, E, P, T);
}

void kda_replay(Model& m, SequenceState& st, int n_tokens) {
    const ModelConfig& c = m.cfg;
    const Compute& cp = m.compute;
    const int64_t P = c.kda_width(), D = c.kda_head_dim, H = c.kda_num_heads, row = 4 * P + H;
    for (int il = 0; il < c.num_hidden_layers; ++il) {
        if (c.is_mla(il)) continue;
        const KdaWeights& w = m.replay_weights[size_t(il)];
        const float* in = st.captured_inputs(il);
        cp.parallel_for(H, [&](int64_t h, int thread) {
            float* scratch = m.act.kda_head.data() + thread * 5 * D;
            for (int t = 0; t < n_tokens; ++t) {
                const float* r = in + t * row;
                kda_head_token(cp, c, w, h, st.kda_state(il), r, r + P, r + 2 * P, r + 3 * P, r + 4 * P, scratch);
            }
        });
    }
}

}  // namespace k3
