// Gated NoPE MLA (spec 2.6) with a compressed KV cache. Each position caches only its normed
// kv_lora latent and the shared (never rotated) rope slot; keys and values are recovered by
// weight absorption: q_nope . (W_k c) = (W_k^T q_nope) . c, and sum_s p_s (W_v c_s) =
// W_v (sum_s p_s c_s). So a head attends with the query [W_k^T q_nope | q_rope] directly over
// the cached rows [c | k_rope], and projects the mixed latent through W_v afterwards.
#include <cmath>
#include <cstring>

#include "model/blocks.h"
#include "model/norms.h"

namespace k3 {

namespace {

// q_abs[j] = sum_d q_nope[d] * W_k[d][j]: W_k bf16 [nope][kv_lora] (the head's k rows of kv_b).
void absorb_query(const uint16_t* W_k, const float* q_nope, int64_t nope, int64_t kv_lora, float* q_abs) {
    for (int64_t j = 0; j < kv_lora; ++j) q_abs[j] = 0.0f;
    for (int64_t d = 0; d < nope; ++d) {
        const float f = q_nope[d];
        const uint16_t* row = W_k + d * kv_lora;
        for (int64_t j = 0; j < kv_lora; ++j) q_abs[j] += f * bf16_to_f32(row[j]);
    }
}

}  // namespace

void mla_block(Model& m, const MlaWeights& w, int il, std::span<const SeqSpan> seqs, const float* x, float* out,
               int T) {
    const ModelConfig& c = m.cfg;
    Activations& a = m.act;
    const Compute& cp = m.compute;
    const int64_t E = c.hidden_size, H = c.num_attention_heads, NOPE = c.qk_nope_head_dim,
                  ROPE = c.qk_rope_head_dim, QK = NOPE + ROPE, VH = c.v_head_dim, QL = c.q_lora_rank,
                  KVL = c.kv_lora_rank, KV = KVL + ROPE;
    const float scale = 1.0f / std::sqrt(float(QK));  // over the full q/k width, nope + rope

    // q = W_qb rmsnorm(W_qa x)  [T][H][nope + rope]; the low-rank norm uses eps 1e-6
    // (with the latent kv and the output gate logits, which read the same x)
    if (c.mla_use_output_gate)
        cp.matmul_bf16_many({{w.q_a, x, a.mq_a.data(), QL, E}, {w.kv_a, x, a.mkv.data(), KV, E},
                             {w.g, x, a.mg.data(), H * VH, E}},
                            T);
    else
        cp.matmul_bf16_many({{w.q_a, x, a.mq_a.data(), QL, E}, {w.kv_a, x, a.mkv.data(), KV, E}}, T);
    for (int t = 0; t < T; ++t) rmsnorm(&a.mq_a[t * QL], w.q_a_norm, &a.mq_a[t * QL], QL, kMlaLoraNormEps);
    cp.matmul_bf16(w.q_b, a.mq_a.data(), a.mq.data(), H * QK, QL, T);

    // cache row = [rmsnorm(c[:kv_lora]) | c[kv_lora:]], c = W_kva x; the rope slot is not normed
    for (size_t s = 0; s < seqs.size(); ++s) {
        const SeqSpan& sq = seqs[s];
        float* rows = sq.st->latent_rows(il);
        for (int t = sq.t0; t < sq.t0 + sq.n; ++t) {
            float* row = rows + int64_t(sq.pos0 + t - sq.t0) * KV;
            rmsnorm(&a.mkv[t * KV], w.kv_a_norm, row, KVL, kMlaLoraNormEps);
            std::memcpy(row + KVL, &a.mkv[t * KV + KVL], sizeof(float) * size_t(ROPE));
            a.seq_of[size_t(t)] = int32_t(s);
        }
    }

    // causal attention of every (token, head) over its sequence's cached rows, in the latent space
    cp.parallel_for(T * H, [&](int64_t item, int thread) {
        const int64_t t = item / H, h = item % H;
        const SeqSpan& sq = seqs[size_t(a.seq_of[size_t(t)])];
        const float* rows = sq.st->latent_rows(il);
        const int n_keys = sq.pos0 + int(t) - sq.t0 + 1;
        float* attn_scratch = sq.st->attn_scratch.data() + int64_t(thread) * sq.st->n_ctx;
        const float* q = &a.mq[item * QK];
        float* q_abs = &a.mq_abs[item * KV];
        float* ctx = &a.mctx[item * KVL];
        float* o = &a.mo[item * VH];
        const uint16_t* W_k = w.kv_b + h * (NOPE + VH) * KVL;  // [nope][kv_lora]
        const uint16_t* W_v = W_k + NOPE * KVL;               // [v][kv_lora]
        absorb_query(W_k, q, NOPE, KVL, q_abs);
        std::memcpy(q_abs + KVL, q + NOPE, sizeof(float) * size_t(ROPE));
        cp.k.attend_head(q_abs, rows, KV, rows, KV, n_keys, int(KV), int(KVL), scale, ctx, attn_scratch);
        cp.k.matvec_bf16(W_v, ctx, o, VH, KVL);
        // gate before o_proj, no norm
        if (c.mla_use_output_gate)
            for (int64_t j = 0; j < VH; ++j) o[j] *= sigmoid(a.mg[t * H * VH + h * VH + j]);
    });

    // out = W_o o  [T][E]
    cp.matmul_bf16(w.o, a.mo.data(), out, E, H * VH, T);
}

}  // namespace k3
