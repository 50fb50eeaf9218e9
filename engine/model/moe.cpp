// The latent MoE (docs/model.md "Latent MoE"). Per token: a full-width sigmoid router picks top-k
// experts (the correction bias only for the choice), the input is projected down to the latent
// width, the chosen MXFP4 SiTU-GLU experts run there, their weighted sum is RMS-normed and
// projected back up, and the shared experts (on the original input) are added.
//
// For a pass of T tokens the experts are applied expert-major: the union of the pass's
// choices is acquired from the store once (in batches the store allows), and each expert runs
// once over all the tokens that chose it (in groups of rows the activations hold). Its per-token
// outputs land in their own rows and are summed per token in top-k order afterwards, so a pass
// gives exactly the bits of one token at a time (kernels.h: matmul rows equal matvec bits).
// model.cpp calls the three steps: moe_route per tile, moe_experts once, moe_combine per tile.
//
// Under expert parallelism (remote_experts.h) the rows of the experts other ranks own are
// computed there and come back into the same rows of ex_out, so the top-k sum reads every row
// where one process would have written it.
#include <algorithm>
#include <cmath>

#include "model/blocks.h"
#include "model/norms.h"

namespace k3 {

void select_experts(const float* scores, const float* bias, int n, int k, bool renormalize, float scale,
                    float* corrected, int32_t* idx, float* weight) {
    for (int e = 0; e < n; ++e) corrected[e] = scores[e] + bias[e];
    for (int j = 0; j < k; ++j) {
        int best = -1;
        for (int e = 0; e < n; ++e)
            if (corrected[e] != -INFINITY && (best < 0 || corrected[e] > corrected[best])) best = e;
        idx[j] = best;
        weight[j] = scores[best];
        corrected[best] = -INFINITY;
    }
    if (renormalize && k > 1) {
        double sum = 0;
        for (int j = 0; j < k; ++j) sum += weight[j];
        const float inv = float(1.0 / (sum + 1e-20));
        for (int j = 0; j < k; ++j) weight[j] *= inv;
    }
    for (int j = 0; j < k; ++j) weight[j] *= scale;
}

namespace {

// Rows per work item so that experts x row blocks give every thread several items.
// Whole experts when there are enough of them, else blocks Compute can scatter.
int64_t block_rows(int64_t rows, int n_experts, int nth) {
    const int64_t want_blocks = (4 * nth + n_experts - 1) / n_experts;
    if (want_blocks <= 1) return rows;
    const int64_t r = (rows + want_blocks - 1) / want_blocks;
    return std::min({rows, kMaxBlockRows, (r + 15) / 16 * 16});
}

// Runs the experts union_ids[b0 .. b0+nb) (their runs in a.expert_runs[0..nb)) over the rows
// [w0, w1) of the expert-sorted order (a group: its inputs are gathered into ex_in first),
// writing those rows of ex_out.
void run_experts(Model& m, int il, int b0, int nb, int64_t w0, int64_t w1) {
    const ModelConfig& c = m.cfg;
    Activations& a = m.act;
    const Compute& cp = m.compute;
    const int64_t L = c.routed_expert_hidden_size, I = c.moe_intermediate_size;
    const float b1 = c.activation_situ_beta, b2 = c.activation_situ_linear_beta;

    // the group's inputs: each row's token's latent input
    cp.parallel_for(w1 - w0, [&](int64_t i, int) {
        std::copy_n(&a.lat[size_t(a.slot_token[size_t(w0 + i)]) * size_t(L)], L, &a.ex_in[size_t(i) * size_t(L)]);
    });

    // Work items are (expert, block of output rows) pairs over `rows` output rows: fn gets the
    // expert's bound weights, its first row p0 in the group, its rows n_u there and the output
    // rows to write. An expert outside the group has no rows in it.
    auto for_expert_rows = [&](int64_t rows, auto&& fn) {
        const int64_t rb = block_rows(rows, nb, cp.nth), nblk = (rows + rb - 1) / rb;
        cp.parallel_for(nb * nblk, [&](int64_t item, int thread) {
            const int u = int(item / nblk);
            const int32_t e = a.union_ids[b0 + u];
            const int64_t p0 = std::max<int64_t>(a.first_slot[e], w0), p1 = std::min<int64_t>(a.cursor[e], w1);
            if (p1 <= p0) return;
            const ExpertWeights ew = bind_expert(m.ckpt.expert(il, e), a.expert_runs[u]);
            const int64_t r0 = (item % nblk) * rb;
            fn(ew, p0, p1 - p0, RowRange{r0, std::min(rows, r0 + rb)}, thread);
        });
    };

    // gate = W1 z, up = W3 z for each expert's tokens  [n_u][I]
    for_expert_rows(I, [&](const ExpertWeights& ew, int64_t p0, int64_t n_u, RowRange r, int thread) {
        const int64_t g = p0 - w0;
        cp.mxfp4_rows(ew.w1_packed, ew.w1_scale, &a.ex_in[g * L], &a.ex_gate[g * I], I, L, n_u, r, thread);
        cp.mxfp4_rows(ew.w3_packed, ew.w3_scale, &a.ex_in[g * L], &a.ex_up[g * I], I, L, n_u, r, thread);
    });
    // act = SiTU-GLU(gate, up), in place
    parallel_situ_glu(cp, a.ex_gate.data(), a.ex_up.data(), (w1 - w0) * I, b1, b2);
    // e = W2 act  [n_u][L], into the pass's rows
    for_expert_rows(L, [&](const ExpertWeights& ew, int64_t p0, int64_t n_u, RowRange r, int thread) {
        cp.mxfp4_rows(ew.w2_packed, ew.w2_scale, &a.ex_gate[(p0 - w0) * I], &a.ex_out[p0 * L], L, I, n_u, r, thread);
    });
}

// Below this share of confirmed predictions a wrong read costs more than a right one saves
// with the trunk in memory (performance.md, "Next-layer lookahead"); judged after kJudgeAfter.
constexpr double kResidentPrecision = 0.75;
constexpr uint64_t kJudgeAfter = 256;

// Next-layer lookahead: layer il+1's router applied to this layer's MoE input predicts the
// experts il+1 will choose, and their reads are issued now so they overlap this layer's
// experts and the next layer's attention. It only schedules reads: nothing computed depends on
// it, so outputs stay exact. Decode steps only (a prefill chunk's union is most of the pool),
// and only when the next layer's run is in memory already (pinned, or read ahead by the ring).
// The prediction is always scored against the next layer's choice (a router matvec, cheap),
// and with the trunk resident its reads go ahead only while it proves precise.
void look_ahead(Model& m, int il, const float* x, int T) {
    const ModelConfig& c = m.cfg;
    Activations& a = m.act;
    const int next = il + 1;
    a.ahead_layer = -1;
    if (T > kLookaheadRows || next >= c.num_hidden_layers || c.is_dense(next)) return;
    const WeightStore::Lookahead mode = m.store.lookahead();
    if (mode == WeightStore::Lookahead::Off) return;
    const uint8_t* run = m.store.peek_layer(next);
    if (!run) return;
    const LayerLayout& lay = m.layouts[size_t(next)];
    widen_layer_vectors(c, lay, run, m.vectors[size_t(next)]);
    const MoeWeights w = bind_layer(lay, run, m.vectors[size_t(next)]).moe;
    const int NE = c.num_experts, K = c.num_experts_per_token;
    m.compute.matmul_bf16(w.router, x, a.ahead_scores.data(), NE, c.hidden_size, T);
    a.ahead_n = 0;
    for (int t = 0; t < T; ++t) {
        float* s = &a.ahead_scores[size_t(t) * NE];
        for (int e = 0; e < NE; ++e) s[e] = sigmoid(s[e]);
        int32_t* sel = &a.ahead_sel[size_t(t) * K];
        select_experts(s, w.router_bias, NE, K, false, 1.0f, a.router_c.data(), sel, &a.ahead_w[size_t(t) * K]);
        for (int j = 0; j < K; ++j)
            if (std::find(a.ahead_union.begin(), a.ahead_union.begin() + a.ahead_n, sel[j]) == a.ahead_union.begin() + a.ahead_n)
                a.ahead_union[size_t(a.ahead_n++)] = sel[j];
    }
    a.ahead_layer = next;
    // Only this process's experts are read here (model.h: experts_begin..experts_end).
    int n_own = 0;
    for (int i = 0; i < a.ahead_n; ++i)
        if (a.ahead_union[size_t(i)] >= m.experts_begin && a.ahead_union[size_t(i)] < m.experts_end)
            a.prefetch_ids[size_t(n_own++)] = a.ahead_union[size_t(i)];
    const bool judged = m.lookahead_predicted >= kJudgeAfter;
    const bool precise = judged && double(m.lookahead_confirmed) >= kResidentPrecision * double(m.lookahead_predicted);
    if (mode == WeightStore::Lookahead::Streamed || precise)
        m.store.prefetch_experts(next, std::span<const int32_t>(a.prefetch_ids.data(), size_t(n_own)));
}

// Scores the prediction made for layer il against the experts it chose (n_assigned).
void score_lookahead(Model& m, int il) {
    Activations& a = m.act;
    if (a.ahead_layer != il) return;
    for (int i = 0; i < a.ahead_n; ++i) m.lookahead_confirmed += a.n_assigned[size_t(a.ahead_union[size_t(i)])] > 0 ? 1 : 0;
    m.lookahead_predicted += uint64_t(a.ahead_n);
    a.ahead_layer = -1;
}

// A prefill chunk whose union covers half of this layer's pool or more will likely ask the next
// layer for its lowest experts first (batches go in expert order, which is file order): their
// reads go while this layer's last batch computes, without waiting for the next router. At
// most one batch, so a wrong guess costs one batch of reads. Half, not three quarters: a
// 512-token chunk of k3-mini covers about 60%, and its layers' first batches were then most of
// its wait on reads (docs/performance.md, "Prefill pipeline": 2.9-3.2% of the prefill waiting
// at three quarters, 1.4-1.5% at half, for 3% more bytes read).
void prefetch_next_layer(Model& m, int il, int T, int n_union) {
    const ModelConfig& c = m.cfg;
    const int next = il + 1;
    if (T <= kLookaheadRows || next >= c.num_hidden_layers || c.is_dense(next)) return;
    const int own = m.experts_end - m.experts_begin;  // this process's share (model.h)
    if (2 * int64_t(n_union) < int64_t(own)) return;
    const int n = std::min(own, std::max(1, m.store.max_experts_per_acquire()));
    Activations& a = m.act;
    for (int e = 0; e < n; ++e) a.prefetch_ids[size_t(e)] = m.experts_begin + e;
    m.store.prefetch_experts(next, std::span<const int32_t>(a.prefetch_ids.data(), size_t(n)));
}

}  // namespace

void moe_route(Model& m, const MoeWeights& w, const float* x, int r0, int n) {
    const ModelConfig& c = m.cfg;
    Activations& a = m.act;
    const int64_t E = c.hidden_size, L = c.routed_expert_hidden_size;
    const int NE = c.num_experts, K = c.num_experts_per_token;
    StageClock clock(m.stage_seconds, ForwardStage::MoeProducts);

    // router logits [n][n_expert] and the latent input z = W_down x [n][L] (the pass's rows)
    m.compute.matmul_bf16_many({{w.router, x, a.router.data(), NE, E}, {w.latent_down, x, &a.lat[size_t(r0) * size_t(L)], L, E}},
                               n);

    // s = sigmoid(logits); top-k per token
    clock.next(ForwardStage::Routing);
    for (int i = 0; i < n; ++i) {
        float* s = &a.router[size_t(i) * NE];
        for (int e = 0; e < NE; ++e) s[e] = sigmoid(s[e]);
        const size_t t = size_t(r0 + i);
        select_experts(s, w.router_bias, NE, K, c.moe_renormalize, c.routed_scaling_factor, a.router_c.data(),
                       &a.sel[t * K], &a.sel_w[t * K]);
    }
}

Status routed_experts(Model& m, int il, int n_union, const float* x, int T, StageClock& clock) {
    Activations& a = m.act;
    // routed experts, acquired once per pass in batches the store can hold, pipelined: while a
    // batch computes, the next batch's reads are in flight (double-buffered within the cache's
    // budget: a prefetch takes only free or unused slots, never a held one), and while the last
    // batch of a pass computes, the next layer's first experts are read (prefetch_next_layer).
    // Only reads are scheduled, so the bits are those of reading each batch when it is asked
    // for. A batch's rows run in groups of at most a.expert_rows.
    const int per_acquire = std::max(1, m.store.max_experts_per_acquire());
    for (int b0 = 0; b0 < n_union; b0 += per_acquire) {
        const int nb = std::min(per_acquire, n_union - b0);
        clock.next(ForwardStage::ExpertWait);
        Status st = m.store.acquire_experts(il, std::span<const int32_t>(&a.union_ids[b0], size_t(nb)),
                                            a.expert_runs.data());
        if (!st.ok()) return st;
        clock.next(ForwardStage::Routing);
        if (b0 + nb < n_union) {
            const int next_nb = std::min(per_acquire, n_union - b0 - nb);
            m.store.prefetch_experts(il, std::span<const int32_t>(&a.union_ids[b0 + nb], size_t(next_nb)));
        } else {
            // This layer's reads are all done; the next layer's go now.
            if (x) look_ahead(m, il, x, T);
            prefetch_next_layer(m, il, T, n_union);
        }
        clock.next(ForwardStage::Experts);
        const int64_t rows0 = a.first_slot[a.union_ids[b0]], rows1 = a.cursor[a.union_ids[b0 + nb - 1]];
        for (int64_t w0 = rows0; w0 < rows1; w0 += a.expert_rows)
            run_experts(m, il, b0, nb, w0, std::min(rows1, w0 + a.expert_rows));
        m.store.release_experts(il);
    }
    return Status::Ok();
}

Status moe_experts(Model& m, int il, int T) {
    const ModelConfig& c = m.cfg;
    Activations& a = m.act;
    const int64_t L = c.routed_expert_hidden_size;
    const int NE = c.num_experts, K = c.num_experts_per_token;
    StageClock clock(m.stage_seconds, ForwardStage::Routing);

    // sort the (token, choice) pairs by expert: expert e's tokens are rows first_slot[e].. of the
    // expert-sorted order
    std::fill(a.n_assigned.begin(), a.n_assigned.end(), 0);
    for (int64_t i = 0; i < int64_t(T) * K; ++i) a.n_assigned[a.sel[i]]++;
    int n_union = 0, next = 0;
    for (int e = 0; e < NE; ++e) {
        a.first_slot[e] = a.cursor[e] = next;
        next += a.n_assigned[e];
        if (a.n_assigned[e] > 0) a.union_ids[n_union++] = e;
    }
    score_lookahead(m, il);
    for (int t = 0; t < T; ++t)
        for (int j = 0; j < K; ++j) {
            const int slot = a.cursor[a.sel[t * K + j]]++;
            a.slot_of[t * K + j] = slot;
            a.slot_token[slot] = t;
        }

    // Expert parallelism (model/remote_experts.h): this process owns the lowest share of the
    // experts, a prefix of the ascending union; the other ranks' rows are one contiguous stretch
    // of the expert-sorted order, sent (their tokens and the pass's latent inputs) before the
    // local experts run, and their outputs come back into the same rows of ex_out.
    int n_local = n_union;
    if (m.remote) {
        n_local = int(std::lower_bound(a.union_ids.begin(), a.union_ids.begin() + n_union, m.experts_end) -
                      a.union_ids.begin());
        if (n_local < n_union) {
            const int64_t s0 = a.first_slot[a.union_ids[n_local]];
            Status st = m.remote->start(il, std::span<const int32_t>(&a.union_ids[n_local], size_t(n_union - n_local)),
                                        a.n_assigned.data(), &a.slot_token[s0], a.lat.data(), T, &a.ex_out[s0 * L], L);
            if (!st.ok()) return st;
        }
    }
    // a decode step's x is its only tile's, still in a.x (the next layer's lookahead)
    Status local = routed_experts(m, il, n_local, a.x.data(), T, clock);
    if (n_local < n_union) {
        clock.next(ForwardStage::ExpertWait);
        Status remote = m.remote->finish();  // also when the local part failed: ex_out is ours again
        if (local.ok()) local = remote;
    }
    return local;
}

void moe_combine(Model& m, const MoeWeights& w, const float* x, float* out, int r0, int n) {
    const ModelConfig& c = m.cfg;
    Activations& a = m.act;
    const Compute& cp = m.compute;
    const int64_t E = c.hidden_size, L = c.routed_expert_hidden_size, SI = c.shared_intermediate();
    const int K = c.num_experts_per_token;
    StageClock clock(m.stage_seconds, ForwardStage::MoeProducts);

    // acc = sum_j w_j e_j in top-k order, then RMSNorm of the aggregate  [n][L]
    cp.parallel_for(n, [&](int64_t i, int) {
        const int64_t t = r0 + i;
        float* acc = &a.lat_acc[i * L];
        std::fill(acc, acc + L, 0.0f);
        for (int j = 0; j < K; ++j) {
            const float wj = a.sel_w[t * K + j];
            const float* e = &a.ex_out[int64_t(a.slot_of[t * K + j]) * L];
            for (int64_t q = 0; q < L; ++q) acc[q] += wj * e[q];
        }
        if (c.latent_moe_use_norm) rmsnorm(acc, w.latent_norm, acc, L, c.rms_norm_eps);
    });

    // out = W_up acc  [n][E]
    cp.matmul_bf16(w.latent_up, a.lat_acc.data(), out, E, L, n);

    // shared experts on the original input, unweighted, added after the up-projection
    if (SI > 0) {
        const float b1 = c.activation_situ_beta, b2 = c.activation_situ_linear_beta;
        cp.matmul_bf16_many({{w.shared_gate, x, a.sgate.data(), SI, E}, {w.shared_up, x, a.sup.data(), SI, E}}, n);
        parallel_situ_glu(cp, a.sgate.data(), a.sup.data(), n * SI, b1, b2);
        cp.matmul_bf16(w.shared_down, a.sgate.data(), a.sout.data(), E, SI, n);
        for (int64_t i = 0; i < n * E; ++i) out[i] += a.sout[i];
    }
}

}  // namespace k3
