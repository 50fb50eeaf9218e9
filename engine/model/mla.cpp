// Gated NoPE MLA (docs/model.md "Gated NoPE MLA") with a compressed KV cache. Each position caches
// only its normed kv_lora latent and the shared (never rotated) rope slot; keys and values are
// recovered by weight absorption: q_nope . (W_k c) = (W_k^T q_nope) . c, and sum_s p_s (W_v c_s) =
// W_v (sum_s p_s c_s). So a head attends with the query [W_k^T q_nope | q_rope] directly over the
// cached rows [c | k_rope], and projects the mixed latent through W_v afterwards.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/blocks.h"
#include "model/norms.h"

namespace k3 {

namespace {

// Queries per attention tile at most: their scores of one key block stay on the stack (16 KiB).
// Each key block comes from memory once per tile, so past the caches a tile's queries are what
// each byte of the cached rows feeds: 64 (two thirds of a K3 token's 96 heads) keep the long
// prompts' attention compute-bound where 16 left it waiting on memory (docs/performance.md,
// "Attention at long context"); the tile, its queries' running values (128 KiB at K3's widths)
// and a block (147 KiB) stay in L2.
constexpr int64_t kMaxAttendTile = 64;

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
    StageClock clock(m.stage_seconds, ForwardStage::MlaProducts);

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

    // the absorbed query of every (token, head): [W_k^T q_nope | q_rope], W_k bf16 [nope][kv_lora]
    // (the head's k rows of kv_b)
    clock.next(ForwardStage::MlaAttention);
    cp.parallel_for(T * H, [&](int64_t item, int) {
        const int64_t h = item % H;
        const float* q = &a.mq[item * QK];
        float* q_abs = &a.mq_abs[item * KV];
        cp.k.matvec_transposed_bf16(w.kv_b + h * (NOPE + VH) * KVL, q, q_abs, NOPE, KVL);
        std::memcpy(q_abs + KVL, q + NOPE, sizeof(float) * size_t(ROPE));
    });

    // causal attention of every (token, head) over its sequence's cached rows, in the latent
    // space: tiles of consecutive (token, head) queries of one sequence share each key block
    // while it is in cache (kernels.h, attend_block). A query's bits do not depend on its tile,
    // so the tile size is only a matter of spreading the work over the threads.
    const int64_t tile = std::clamp<int64_t>((T * H + 4 * cp.nth - 1) / (4 * cp.nth), 1, kMaxAttendTile);
    int64_t n_tiles = 0;
    for (const SeqSpan& sq : seqs) n_tiles += (int64_t(sq.n) * H + tile - 1) / tile;
    cp.parallel_for(n_tiles, [&](int64_t tile_index, int) {
        size_t s = 0;  // the tile's sequence and first query
        int64_t first = tile_index;
        for (;; ++s) {
            const int64_t in_seq = (int64_t(seqs[s].n) * H + tile - 1) / tile;
            if (first < in_seq) break;
            first -= in_seq;
        }
        const SeqSpan& sq = seqs[s];
        const int64_t q0 = int64_t(sq.t0) * H + first * tile;  // item index (t * H + h)
        const int nq = int(std::min<int64_t>(tile, int64_t(sq.t0 + sq.n) * H - q0));
        const float* rows = sq.st->latent_rows(il);
        int32_t n_keys[kMaxAttendTile], n_valid[kMaxAttendTile];
        float m_run[kMaxAttendTile], l_run[kMaxAttendTile], scores[kMaxAttendTile * kAttendBlock];
        for (int i = 0; i < nq; ++i) {
            n_keys[i] = sq.pos0 + int32_t((q0 + i) / H) - sq.t0 + 1;
            m_run[i] = -INFINITY;
            l_run[i] = 0.0f;
        }
        float* ctx = &a.mctx[q0 * KVL];
        std::memset(ctx, 0, sizeof(float) * size_t(nq * KVL));
        // queries are in token order, so those that see a block are a suffix of the tile
        for (int32_t b0 = 0; b0 < n_keys[nq - 1]; b0 += kAttendBlock) {
            int i0 = 0;
            while (n_keys[i0] <= b0) ++i0;
            for (int i = i0; i < nq; ++i) n_valid[i] = std::min<int32_t>(kAttendBlock, n_keys[i] - b0);
            cp.k.attend_block(&a.mq_abs[(q0 + i0) * KV], KV, nq - i0, &n_valid[i0], rows + int64_t(b0) * KV, KV,
                              rows + int64_t(b0) * KV, KV, int(KV), int(KVL), scale, &m_run[i0], &l_run[i0],
                              ctx + i0 * KVL, KVL, scores);
        }
        for (int i = 0; i < nq; ++i) {
            const int64_t item = q0 + i, t = item / H, h = item % H;
            float* c_i = ctx + i * KVL;
            for (int64_t j = 0; j < KVL; ++j) c_i[j] = c_i[j] / l_run[i];
            float* o = &a.mo[item * VH];
            cp.k.matvec_bf16(w.kv_b + h * (NOPE + VH) * KVL + NOPE * KVL, c_i, o, VH, KVL);  // W_v [v][kv_lora]
            // gate before o_proj, no norm
            if (c.mla_use_output_gate)
                for (int64_t j = 0; j < VH; ++j) o[j] *= sigmoid(a.mg[t * H * VH + h * VH + j]);
        }
    });

    // out = W_o o  [T][E]
    clock.next(ForwardStage::MlaProducts);
    cp.matmul_bf16(w.o, a.mo.data(), out, E, H * VH, T);
}

}  // namespace k3
