// The forward pass (docs/model.md "Layer stack"): embedding, the decoder layers with their
// attention residuals, the model-level mix, final norm and lm_head. Read top to bottom; each step
// is one call.
#include "model/model.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

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

// h[t - r0] = AttnRes(blocks[t][0..n_blocks) + pref[t]) for the tokens t of rows [r0, r0 + n).
void mix_residuals(Model& m, int n_blocks, const float* fold, float* h, int r0, int n) {
    const StageClock clock(m.stage_seconds, ForwardStage::ResidualMix);
    Activations& a = m.act;
    const int64_t E = m.cfg.hidden_size;
    m.compute.parallel_for(n, [&](int64_t i, int) {
        const int64_t t = r0 + i;
        const float* src[256];
        for (int s = 0; s < n_blocks; ++s) src[s] = &a.blocks[(size_t(t) * a.n_blocks_max + s) * E];
        src[n_blocks] = &a.pref[size_t(t) * E];
        attn_res_mix(src, n_blocks + 1, fold, m.cfg.rms_norm_eps, E, h + size_t(i) * E);
    });
}

void rmsnorm_rows(Model& m, const float* x, const float* w, float* y, int T) {
    const StageClock clock(m.stage_seconds, ForwardStage::Norms);
    const int64_t E = m.cfg.hidden_size;
    m.compute.parallel_for(T, [&](int64_t t, int) { rmsnorm(x + t * E, w, y + t * E, E, m.cfg.rms_norm_eps); });
}

// pref = add (a block starts with it) or pref + add, for the tokens of rows [r0, r0 + n).
void add_residual(Model& m, const float* add, bool block_start, int r0, int n) {
    const StageClock clock(m.stage_seconds, ForwardStage::ResidualMix);
    const int64_t E = m.cfg.hidden_size;
    float* pref = m.act.pref.data() + int64_t(r0) * E;
    for (int64_t i = 0; i < n * E; ++i) pref[i] = block_start ? add[i] : pref[i] + add[i];
}

// A tile of a pass: rows [r0, r0 + n) and each sequence's part of them (SeqSpan rows relative
// to the tile, positions absolute).
struct Tile {
    int r0 = 0, n = 0;
    std::vector<SeqSpan> seqs;
};

std::vector<Tile> cut_tiles(std::span<const SeqSpan> seqs, int T, int tile_tokens) {
    std::vector<Tile> tiles;
    for (int r0 = 0; r0 < T; r0 += tile_tokens) {
        Tile tile{r0, std::min(tile_tokens, T - r0), {}};
        for (const SeqSpan& sq : seqs) {
            const int b = std::max(sq.t0, r0), e = std::min(sq.t0 + sq.n, r0 + tile.n);
            if (b < e) tile.seqs.push_back(SeqSpan{sq.st, b - r0, e - b, sq.pos0 + (b - sq.t0)});
        }
        tiles.push_back(std::move(tile));
    }
    return tiles;
}

// Model::test_hold_pass: waits while the file exists, unless cancelled; side steps due meanwhile
// run (a held pass is a suspended one).
void hold_for_test(const std::string& file, const CancelFlag* cancel, const BetweenLayers* between_layers, int il) {
    std::error_code ec;
    while (std::filesystem::exists(file, ec) && !(cancel && cancel->load(std::memory_order_relaxed))) {
        if (between_layers) (*between_layers)(il);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

// The MLP's input of a tile: x = rmsnorm(AttnRes(blocks, pref)) (h holds the mix).
void mlp_input(Model& m, const LayerWeights& w, int n_blocks, const Tile& tile) {
    Activations& a = m.act;
    mix_residuals(m, n_blocks, w.fold_mlp, a.h.data(), tile.r0, tile.n);
    rmsnorm_rows(m, a.h.data(), w.post_norm, a.x.data(), tile.n);
}

}  // namespace

Model::Model(const Checkpoint& ckpt_, const Kernels& k, int n_threads, WeightStore& store_, int chunk_tokens)
    : ckpt(ckpt_), cfg(ckpt_.config), compute(k, n_threads), store(store_), pass_cost(k3::pass_cost(ckpt_.config)),
      act(ckpt_.config, chunk_tokens > 0 ? chunk_tokens : chunk_tokens_for(ckpt_.config)) {
    K3_CHECK(act.n_blocks_max < 255, "too many attention-residual blocks (%d)", act.n_blocks_max);
    experts_end = cfg.num_experts;
    layouts = layout_layers(ckpt);
    vectors.resize(layouts.size());
    for (size_t il = 0; il < layouts.size(); ++il) size_layer_vectors(cfg, layouts[il], vectors[il]);
    const std::string embed_name = kModelPrefix + "embed_tokens.weight";
    const TensorInfo* et = ckpt.directory.find(embed_name);
    if (!et) throw Error(ErrorKind::Checkpoint, "tensor " + embed_name + " is missing from " + ckpt.dir.string());
    embed_file = io::File::open(ckpt.directory.shards()[size_t(et->shard)].path, /*try_direct=*/false);
    embed_offset = et->offset;
    embed_row.resize(size_t(cfg.hidden_size));
    const TensorInfo* lt = ckpt.directory.find(kLmHeadName);
    if (!lt) throw Error(ErrorKind::Checkpoint, "tensor " + kLmHeadName + " is missing from " + ckpt.dir.string());
    lm_head = io::AlignedBuffer(size_t(lt->nbytes));
    lm_head_file = io::File::open(ckpt.directory.shards()[size_t(lt->shard)].path, /*try_direct=*/false);
    lm_head_offset = lt->offset;
    lm_head_file.read_exact(lm_head.data(), lt->nbytes, lt->offset, kLmHeadName);
    final_norm = read_vector(ckpt, kModelPrefix + "norm.weight");
    fold_out = read_vector(ckpt, kModelPrefix + "output_attn_res_norm.weight");
    const std::vector<float> proj = read_vector(ckpt, kModelPrefix + "output_attn_res_proj.weight");
    for (size_t i = 0; i < fold_out.size(); ++i) fold_out[i] = fold_out[i] * proj[i];
    compute.reserve(act.product_tokens);
    replay_weights.resize(layouts.size());
    // kda_block's per-thread scratch: one head's q, k, v, alpha, o
    act.kda_head.assign(size_t(compute.nth) * 5 * size_t(cfg.kda_head_dim), 0.0f);
}

namespace {

// The lm_head read again after a pass borrowed it (Model::lm_head); a failed read leaves it lent.
Status restore_lm_head(Model& m) {
    if (!m.lm_head_lent) return Status::Ok();
    if (Status s = m.lm_head_file.pread_full(m.lm_head.data(), m.lm_head.size(), m.lm_head_offset); !s.ok()) return s;
    m.lm_head_lent = false;
    m.lm_head_reads++;
    return Status::Ok();
}

// lm_head_borrowed: this pass took the lm_head's pages (its output rows fit one tile).
// between_layers: called before each layer (forward_batch's hook; null for none and in a side step).
Status forward_pass(Model& m, std::span<const ForwardItem> items, const CancelFlag* cancel, bool lm_head_borrowed,
                    int* pass_tokens, const BetweenLayers* between_layers, bool side_step) {
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
    *pass_tokens = T;

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

    // The pass goes through the layers together (each weight read once for all its tokens), each
    // layer tile by tile; a tile's rows are computed exactly as in a pass of their own (the
    // kernels are row-independent, attention and KDA advance in token order), so the tile size
    // changes no bit (docs/performance.md, "Prefill passes").
    const std::vector<Tile> tiles = cut_tiles(seqs, T, a.tile_tokens);
    int n_blocks = 0;
    for (int il = 0; il < c.num_hidden_layers; ++il) {
        // other streams' decode steps, when due (the pass's rows wait in m.act meanwhile)
        if (between_layers) (*between_layers)(il);
        if (!m.test_hold_pass.empty() && !side_step && T > 1 && il == c.num_hidden_layers / 2)
            hold_for_test(m.test_hold_pass, cancel, between_layers, il);
        if (cancel && cancel->load(std::memory_order_relaxed)) return {StatusCode::Cancelled, "cancelled"};
        clock.next(ForwardStage::TrunkWait);
        const LayerLease layer(m, il);
        clock.pause();
        if (!layer.status().ok()) return layer.status();
        const LayerWeights& w = layer.weights();
        // at a block boundary the running residual is snapshot; the new block starts empty
        const bool block_start = il % c.attn_res_block_size == 0;
        const int attn_blocks = n_blocks, mlp_blocks = n_blocks + (block_start ? 1 : 0);

        for (const Tile& tile : tiles) {
            // pre-attention mix of the block snapshots and the running residual (once any exist)
            if (attn_blocks > 0) mix_residuals(m, attn_blocks, w.fold_attn, a.h.data(), tile.r0, tile.n);
            else std::copy_n(&a.pref[size_t(tile.r0) * size_t(E)], tile.n * E, a.h.data());
            trace_step(m.trace, "attn_in", il, a.h.data(), tile.n, E);
            if (block_start) {
                clock.next(ForwardStage::ResidualMix);
                for (int r = tile.r0; r < tile.r0 + tile.n; ++r)
                    std::copy_n(&a.pref[r * E], E, &a.blocks[(size_t(r) * a.n_blocks_max + attn_blocks) * E]);
                clock.pause();
            }
            // attention rmsnorm
            rmsnorm_rows(m, a.h.data(), w.input_norm, a.x.data(), tile.n);
            // attention: MLA with the latent cache, or KDA with the recurrent state
            if (c.is_mla(il))
                mla_block(m, w.mla, il, tile.seqs, a.x.data(), a.out.data(), tile.n);
            else
                kda_block(m, w.kda, il, tile.seqs, a.x.data(), a.out.data(), tile.n);
            trace_step(m.trace, "attn_out", il, a.out.data(), tile.n, E);
            // residual: pref = attn (new block) or pref + attn
            add_residual(m, a.out.data(), block_start, tile.r0, tile.n);
            if (!c.is_dense(il)) continue;
            // dense MLP: pre-MLP mix (a snapshot always exists here: layer 0 is a block start),
            // rmsnorm, MLP, residual
            mlp_input(m, w, mlp_blocks, tile);
            trace_step(m.trace, "ffn_in", il, a.h.data(), tile.n, E);
            dense_mlp(m, w.dense, a.x.data(), a.out.data(), tile.n);
            trace_step(m.trace, "mlp_out", il, a.out.data(), tile.n, E);
            add_residual(m, a.out.data(), false, tile.r0, tile.n);
            trace_step(m.trace, "out", il, &a.pref[size_t(tile.r0) * size_t(E)], tile.n, E);
        }
        if (!c.is_dense(il)) {
            // latent MoE: every tile routed, then the routed experts expert by expert over the
            // whole pass (each read once), then each tile's weighted sum, shared experts, residual
            for (const Tile& tile : tiles) {
                mlp_input(m, w, mlp_blocks, tile);
                trace_step(m.trace, "ffn_in", il, a.h.data(), tile.n, E);
                moe_route(m, w.moe, a.x.data(), tile.r0, tile.n);
            }
            if (Status s = moe_experts(m, il, T); !s.ok()) return s;  // the lease gives the layer back
            for (const Tile& tile : tiles) {
                // one tile's x is still there from routing; more are computed again (same bits)
                if (tiles.size() > 1) mlp_input(m, w, mlp_blocks, tile);
                moe_combine(m, w.moe, a.x.data(), a.out.data(), tile.r0, tile.n);
                trace_step(m.trace, "moe_out", il, a.out.data(), tile.n, E);
                add_residual(m, a.out.data(), false, tile.r0, tile.n);
                trace_step(m.trace, "out", il, &a.pref[size_t(tile.r0) * size_t(E)], tile.n, E);
            }
        }
        n_blocks = mlp_blocks;
        if (!side_step) m.layers_evaluated.fetch_add(1, std::memory_order_relaxed);
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
    // a single sequence writes straight into its logits; a batch goes through a.logits
    const bool direct = items.size() == 1;
    if (!direct && a.logits.size() < size_t(n_out) * size_t(V)) a.logits.resize(size_t(n_out) * size_t(V));
    float* dst = direct ? items[0].logits : a.logits.data();
    for (int i0 = 0; i0 < n_out; i0 += a.tile_tokens) {
        const int n = std::min(a.tile_tokens, n_out - i0);
        m.compute.parallel_for(n, [&](int64_t i, int) {
            const int r = out_rows[size_t(i0 + i)];
            const float* src[256];
            for (int s = 0; s < n_blocks; ++s) src[s] = &a.blocks[(size_t(r) * a.n_blocks_max + s) * E];
            src[n_blocks] = &a.pref[size_t(r) * E];
            float* h = &a.final_h[size_t(i) * E];
            attn_res_mix(src, n_blocks + 1, m.fold_out.data(), c.rms_norm_eps, E, h);
            rmsnorm(h, m.final_norm.data(), h, E, c.rms_norm_eps);
        });
        trace_step(m.trace, "result_norm", -1, a.final_h.data(), n, E);
        if (m.lm_head_lent) {
            // the lm_head comes back: where this pass borrowed it, into the pages the pass's
            // tokens give back first (its rows are all in final_h, one tile)
            if (lm_head_borrowed) a.release_pass(T);
            if (Status s = restore_lm_head(m); !s.ok()) return s;
        }
        m.compute.matmul_bf16(reinterpret_cast<const uint16_t*>(m.lm_head.data()), a.final_h.data(),
                              dst + size_t(i0) * size_t(V), V, E, n);
    }
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

// A step run between the layers of a pass (BetweenLayers): in Model::side_act, swapped in for its
// length, so the pass's rows are not touched; it borrows nothing (the pass holds the loan, and
// did not take the lm_head). The trunk ring and the expert cache serve it as any step: the walk
// jumps back to layer 0 and on to the pass's next layer after it, which the ring allows.
Status side_step(Model& m, std::span<const ForwardItem> items, const CancelFlag* cancel) {
    if (!m.side_act) {
        m.side_act = std::make_unique<Activations>(m.cfg, m.act.max_tokens);
        m.side_act->kda_head.assign(m.act.kda_head.size(), 0.0f);
    }
    std::swap(m.act, *m.side_act);
    int pass_tokens = 0;
    const Status s = forward_pass(m, items, cancel, /*lm_head_borrowed=*/false, &pass_tokens, nullptr, /*side_step=*/true);
    m.act.release_pass(pass_tokens);
    std::swap(m.act, *m.side_act);
    m.side_steps++;
    return s;
}

}  // namespace

Status forward_batch(Model& m, std::span<const ForwardItem> items, const CancelFlag* cancel,
                     const BetweenLayers* between_layers) {
    if (m.in_pass) {
        K3_CHECK(!between_layers, "a step between a pass's layers takes no hook of its own");
        return side_step(m, items, cancel);
    }
    // A long pass borrows the expert cache's spare slots for its per-token arrays (the store
    // gives their pages back first) and returns both after it (docs/performance.md, "Prefill passes").
    // It may borrow the lm_head too when its output rows fit one tile (read again before the
    // output product), and pinned trunk layers (read once during the pass, again after it).
    int tokens = 0, out_rows = 0;
    for (const ForwardItem& it : items) {
        tokens += int(it.tokens.size());
        if (it.logits) out_rows += it.all_logits ? int(it.tokens.size()) : 1;
    }
    // (a pass with steps between its layers keeps the lm_head: their output products need it)
    const io::PassLoan loan =
        m.store.begin_pass(m.pass_cost.bytes(tokens), out_rows <= m.act.tile_tokens && !between_layers);
    if (loan.lm_head && !m.lm_head_lent) {
        io::give_pages_back(m.lm_head.data(), m.lm_head.size());
        m.lm_head_lent = true;
    }
    int pass_tokens = 0;
    Status s;
    {
        struct InPass {  // (the hook is the caller's code: whatever way it leaves, the pass is over)
            Model& m;
            explicit InPass(Model& m_) : m(m_) { m.in_pass = true; }
            ~InPass() { m.in_pass = false; }
        } in_pass(m);
        s = forward_pass(m, items, cancel, loan.lm_head, &pass_tokens, between_layers, /*side_step=*/false);
    }
    m.act.release_pass(pass_tokens);
    m.store.end_pass();
    return s;
}

}  // namespace k3
