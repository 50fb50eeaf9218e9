// The forward pass (docs/model.md "Layer stack"): embedding, the decoder layers with their
// attention residuals, the model-level mix, final norm and lm_head. Read top to bottom; each step
// is one call.
#include "model/model.h"

#include <algorithm>
#include <cstring>

#include "model/blocks.h"
#include "model/layer_lease.h"
#include "io/file.h"
#include "model/norms.h"
#include "util/check.h"
#include "k3/error.h"

namespace k3 {

namespace {

AlignedBytes read_resident(const Checkpoint& ckpt, const std::string& name) {
    const TensorInfo* t = ckpt.directory.find(name);
    if (!t) throw Error(ErrorKind::Checkpoint, "tensor " + name + " is missing from " + ckpt.dir.string());
    AlignedBytes b(size_t(t->nbytes));
    io::File::open(ckpt.directory.shards()[size_t(t->shard)].path, /*try_direct=*/false)
        .read_exact(b.data(), t->nbytes, t->offset, name);
    return b;
}

std::vector<float> read_vector(const Checkpoint& ckpt, const std::string& name) {
    const TensorInfo* t = ckpt.directory.find(name);
    AlignedBytes b = read_resident(ckpt, name);
    std::vector<float> v(size_t(t->nbytes / dtype_size(t->dtype)));
    widen_to_f32(b.data(), t->dtype, int64_t(v.size()), v.data());
    return v;
}

// h[t] = AttnRes(blocks[t][0..n_blocks) + pref[t]) for every token of the chunk.
void mix_residuals(Model& m, int n_blocks, const float* fold, float* h, int T) {
    const StageClock clock(m.stage_seconds, ForwardStage::ResidualMix);
    Activations& a = m.act;
    const int64_t E = m.cfg.hidden_size;
    m.compute.parallel_for(T, [&](int64_t t, int) {
        const float* src[256];
        for (int s = 0; s < n_blocks; ++s) src[s] = &a.blocks[(size_t(t) * a.n_blocks_max + s) * E];
        src[n_blocks] = &a.pref[size_t(t) * E];
        attn_res_mix(src, n_blocks + 1, fold, m.cfg.rms_norm_eps, E, h + size_t(t) * E);
    });
}

void rmsnorm_rows(Model& m, const float* x, const float* w, float* y, int T) {
    const StageClock clock(m.stage_seconds, ForwardStage::Norms);
    const int64_t E = m.cfg.hidden_size;
    m.compute.parallel_for(T, [&](int64_t t, int) { rmsnorm(x + t * E, w, y + t * E, E, m.cfg.rms_norm_eps); });
}

// pref = add (a block starts with it) or pref + add, for every token of the chunk.
void add_residual(Model& m, const float* add, bool block_start, int T) {
    const StageClock clock(m.stage_seconds, ForwardStage::ResidualMix);
    float* pref = m.act.pref.data();
    for (int64_t i = 0; i < T * m.cfg.hidden_size; ++i) pref[i] = block_start ? add[i] : pref[i] + add[i];
}

}  // namespace

Model::Model(const Checkpoint& ckpt_, const Kernels& k, int n_threads, WeightStore& store_, int chunk_tokens)
    : ckpt(ckpt_), cfg(ckpt_.config), compute(k, n_threads), store(store_),
      act(ckpt_.config, chunk_tokens > 0 ? chunk_tokens : chunk_tokens_for(ckpt_.config)) {
    K3_CHECK(act.n_blocks_max < 255, "too many attention-residual blocks (%d)", act.n_blocks_max);
    layouts = layout_layers(ckpt);
    vectors.resize(layouts.size());
    for (size_t il = 0; il < layouts.size(); ++il) size_layer_vectors(cfg, layouts[il], vectors[il]);
    const std::string embed_name = kModelPrefix + "embed_tokens.weight";
    const TensorInfo* et = ckpt.directory.find(embed_name);
    if (!et) throw Error(ErrorKind::Checkpoint, "tensor " + embed_name + " is missing from " + ckpt.dir.string());
    embed_file = io::File::open(ckpt.directory.shards()[size_t(et->shard)].path, /*try_direct=*/false);
    embed_offset = et->offset;
    embed_row.resize(size_t(cfg.hidden_size));
    lm_head = read_resident(ckpt, kLmHeadName);
    final_norm = read_vector(ckpt, kModelPrefix + "norm.weight");
    fold_out = read_vector(ckpt, kModelPrefix + "output_attn_res_norm.weight");
    const std::vector<float> proj = read_vector(ckpt, kModelPrefix + "output_attn_res_proj.weight");
    for (size_t i = 0; i < fold_out.size(); ++i) fold_out[i] = fold_out[i] * proj[i];
    compute.reserve(act.max_tokens);
    replay_weights.resize(layouts.size());
    // kda_block's per-thread scratch: one head's q, k, v, alpha, o
    act.kda_head.assign(size_t(compute.nth) * 5 * size_t(cfg.kda_head_dim), 0.0f);
}

Status forward_batch(Model& m, std::span<const ForwardItem> items, const CancelFlag* cancel) {
    const ModelConfig& c = m.cfg;
    Activations& a = m.act;
    const int64_t E = c.hidden_size, V = c.vocab_size;

    // the chunk: every item's tokens, one after the other
    std::vector<SeqSpan> seqs;
    seqs.reserve(items.size());
    int T = 0;
    for (const ForwardItem& it : items) {
        const int n = int(it.tokens.size());
        K3_CHECK(n > 0, "forward() takes at least one token per sequence");
        if (it.st->n_past + n > it.st->n_ctx) return {StatusCode::ContextFull, "the sequence would exceed the context"};
        K3_CHECK(it.rows.empty() || it.rows.size() == it.tokens.size(), "forward(): one row entry per token");
        for (size_t i = 0; i < it.tokens.size(); ++i)
            if (it.tokens[i] < 0 || (it.tokens[i] >= V && (it.rows.empty() || !it.rows[i])))
                return {StatusCode::InvalidArgument, "token id out of range"};
        for (const SeqSpan& other : seqs) K3_CHECK(other.st != it.st, "a sequence appears twice in one chunk");
        seqs.push_back(SeqSpan{it.st, T, n, it.st->n_past});
        T += n;
    }
    K3_CHECK(T > 0 && T <= a.max_tokens, "forward() takes 1..%d tokens, got %d", a.max_tokens, T);

    // embedding: pref[t] = embed[id_t] widened from bf16 (no scaling), one row read per token;
    // an image's position takes its projected row instead (docs/model.md "Images in the prompt")
    StageClock clock(m.stage_seconds, ForwardStage::Embed);
    const int64_t row_bytes = E * int64_t(sizeof(uint16_t));
    int t = 0;
    for (const ForwardItem& it : items)
        for (size_t i = 0; i < it.tokens.size(); ++i) {
            const int32_t id = it.tokens[i];
            if (!it.rows.empty() && it.rows[i]) {
                std::copy_n(it.rows[i], E, &a.pref[size_t(t) * size_t(E)]);
                ++t;
                continue;
            }
            if (Status s = m.embed_file.pread_full(m.embed_row.data(), size_t(row_bytes), m.embed_offset + id * row_bytes);
                !s.ok())
                return s;
            for (int64_t i = 0; i < E; ++i) a.pref[t * E + i] = bf16_to_f32(m.embed_row[size_t(i)]);
            ++t;
        }
    trace_step(m.trace, "embed", -1, a.pref.data(), T, E);
    clock.pause();

    int n_blocks = 0;
    for (int il = 0; il < c.num_hidden_layers; ++il) {
        if (cancel && cancel->load(std::memory_order_relaxed)) return {StatusCode::Cancelled, "cancelled"};
        clock.next(ForwardStage::TrunkWait);
        const LayerLease layer(m, il);
        clock.pause();
        if (!layer.status().ok()) return layer.status();
        const LayerWeights& w = layer.weights();

        // pre-attention mix of the block snapshots and the running residual (once any exist)
        if (n_blocks > 0) mix_residuals(m, n_blocks, w.fold_attn, a.h.data(), T);
        else std::copy_n(a.pref.data(), T * E, a.h.data());
        trace_step(m.trace, "attn_in", il, a.h.data(), T, E);
        // at a block boundary, snapshot the running residual; the new block starts empty
        const bool block_start = il % c.attn_res_block_size == 0;
        if (block_start) {
            clock.next(ForwardStage::ResidualMix);
            for (int r = 0; r < T; ++r)
                std::copy_n(&a.pref[r * E], E, &a.blocks[(size_t(r) * a.n_blocks_max + n_blocks) * E]);
            clock.pause();
            ++n_blocks;
        }
        // attention rmsnorm
        rmsnorm_rows(m, a.h.data(), w.input_norm, a.x.data(), T);
        // attention: MLA with the latent cache, or KDA with the recurrent state
        if (c.is_mla(il))
            mla_block(m, w.mla, il, seqs, a.x.data(), a.out.data(), T);
        else
            kda_block(m, w.kda, il, seqs, a.x.data(), a.out.data(), T);
        trace_step(m.trace, "attn_out", il, a.out.data(), T, E);
        // residual: pref = attn (new block) or pref + attn
        add_residual(m, a.out.data(), block_start, T);
        // pre-MLP mix (a snapshot always exists here: layer 0 is a block start)
        mix_residuals(m, n_blocks, w.fold_mlp, a.h.data(), T);
        trace_step(m.trace, "ffn_in", il, a.h.data(), T, E);
        // MLP rmsnorm
        rmsnorm_rows(m, a.h.data(), w.post_norm, a.x.data(), T);
        // MLP: dense for the first layers, latent MoE after
        if (c.is_dense(il)) {
            dense_mlp(m, w.dense, a.x.data(), a.out.data(), T);
        } else if (Status s = moe_ffn(m, w.moe, il, a.x.data(), a.out.data(), T); !s.ok()) {
            return s;  // the lease gives the layer back
        }
        trace_step(m.trace, c.is_dense(il) ? "mlp_out" : "moe_out", il, a.out.data(), T, E);
        // residual
        add_residual(m, a.out.data(), false, T);
        trace_step(m.trace, "out", il, a.pref.data(), T, E);
        m.layers_evaluated.fetch_add(1, std::memory_order_relaxed);
    }
    for (const ForwardItem& it : items) it.st->n_past += int(it.tokens.size());

    // model-level mix, final norm and lm_head for the rows whose logits are wanted, in one
    // product (the lm_head is read once for the whole chunk)
    std::vector<int> out_rows;
    for (size_t s = 0; s < items.size(); ++s) {
        if (!items[s].logits) continue;
        for (int r = items[s].all_logits ? seqs[s].t0 : seqs[s].t0 + seqs[s].n - 1; r < seqs[s].t0 + seqs[s].n; ++r)
            out_rows.push_back(r);
    }
    if (out_rows.empty()) return Status::Ok();
    clock.next(ForwardStage::Output);
    const int n_out = int(out_rows.size());
    m.compute.parallel_for(n_out, [&](int64_t i, int) {
        const int r = out_rows[size_t(i)];
        const float* src[256];
        for (int s = 0; s < n_blocks; ++s) src[s] = &a.blocks[(size_t(r) * a.n_blocks_max + s) * E];
        src[n_blocks] = &a.pref[size_t(r) * E];
        float* h = &a.final_h[size_t(i) * E];
        attn_res_mix(src, n_blocks + 1, m.fold_out.data(), c.rms_norm_eps, E, h);
        rmsnorm(h, m.final_norm.data(), h, E, c.rms_norm_eps);
    });
    trace_step(m.trace, "result_norm", -1, a.final_h.data(), n_out, E);
    // a single sequence writes straight into its logits; a batch goes through a.logits
    const bool direct = items.size() == 1;
    if (!direct && a.logits.size() < size_t(n_out) * size_t(V)) a.logits.resize(size_t(n_out) * size_t(V));
    float* dst = direct ? items[0].logits : a.logits.data();
    m.compute.matmul_bf16(reinterpret_cast<const uint16_t*>(m.lm_head.data()), a.final_h.data(), dst, V, E, n_out);
    if (direct) return Status::Ok();
    size_t next = 0;
    for (size_t s = 0; s < items.size(); ++s) {
        if (!items[s].logits) continue;
        const size_t n = items[s].all_logits ? size_t(seqs[s].n) : 1;
        std::copy_n(&a.logits[next * size_t(V)], n * size_t(V), items[s].logits);
        next += n;
    }
    return Status::Ok();
}

}  // namespace k3
