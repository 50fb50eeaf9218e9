// One function per block of the decoder layer (docs/model.md "Layer stack", "Kimi Delta Attention",
// "Gated NoPE MLA", "Latent MoE"), each over a tile of T tokens laid out [T][width]. They own the
// math glue between kernel calls; model.cpp's forward() calls them in order.
#pragma once
#include <cstdint>
#include <span>

#include "model/model.h"

namespace k3 {

// One sequence's share of a forward chunk: rows [t0, t0 + n) of the chunk are its tokens, at
// positions pos0.. of its state. A chunk holds one or more sequences (batched decode steps and
// prefill chunks together); every row is computed as if its sequence ran alone.
struct SeqSpan {
    SequenceState* st;
    int t0, n, pos0;
};

// Attention residual (docs/model.md "Layer stack"): out = sum_s softmax_s(fold . rmsnorm(v_s)) v_s
// over the sources v_0..v_{n-1}, each a vector of width E.
void attn_res_mix(const float* const* sources, int n_sources, const float* fold, float eps, int64_t E,
                  float* out);

// Kimi Delta Attention (docs/model.md "Kimi Delta Attention"): x [T][E] -> out [T][E]; each
// sequence's recurrent matrices and conv history of layer il are advanced by its tokens.
void kda_block(Model& m, const KdaWeights& w, int il, std::span<const SeqSpan> seqs, const float* x, float* out,
               int T);

// One token of one KDA head: its conv channels and SiLU, L2 norms, decay and delta-rule step, from
// the raw projections of the token (q, k, v, z rows [P], b row [H]); advances the head's part of
// `state` (kda_state's layout) and leaves the head's output, before its norm and gate, in
// scratch[4D..5D) (scratch: 5D floats). kda_block runs it per head and token; `plan` times it
// (cli/token_work.h).
void kda_head_token(const Compute& cp, const ModelConfig& c, const KdaWeights& w, int64_t h, float* state,
                    const float* kq, const float* kk, const float* kv, const float* kz, const float* kb,
                    float* scratch);

// Undoes rejected drafts (spec decoding): with st.kda back at the captured step's start,
// advances every KDA layer by the first n_tokens of that step from the captured recurrence
// inputs. No weight is read; the state gets the bits the forward pass gave those tokens.
void kda_replay(Model& m, SequenceState& st, int n_tokens);

// Gated NoPE MLA with a latent KV cache (docs/model.md "Gated NoPE MLA"): x [T][E] -> out [T][E];
// writes each sequence's latent rows pos0..pos0+n-1 of layer il and attends causally over its own
// rows.
void mla_block(Model& m, const MlaWeights& w, int il, std::span<const SeqSpan> seqs, const float* x, float* out,
               int T);

// Dense SiTU-GLU MLP of layers il < first_k_dense_replace: x [T][E] -> out [T][E].
void dense_mlp(Model& m, const DenseWeights& w, const float* x, float* out, int T);

// The router's choice for one token: top-k by repeated argmax over the corrected scores
// scores + bias (strict >, ties to the lowest index), in selection order, into idx; weights are the
// unbiased scores, renormalised when k > 1, times `scale`. corrected: n floats of scratch.
void select_experts(const float* scores, const float* bias, int n, int k, bool renormalize, float scale,
                    float* corrected, int32_t* idx, float* weight);

// Latent MoE (docs/model.md "Latent MoE") over a pass of T tokens, in three steps:
// moe_route: the tile of rows [r0, r0 + n) with MLP input x [n][E]: its router's choice and
// weights and its latent input (the pass's rows of sel, sel_w, lat).
void moe_route(Model& m, const MoeWeights& w, const float* x, int r0, int n);
// moe_experts: every routed expert of layer il once over the pass's tokens that chose it (ex_out);
// under expert parallelism the other ranks' experts are computed there (model/remote_experts.h).
// Fails (IoError) if the store cannot supply an expert, Unavailable if a rank of expert
// parallelism failed.
Status moe_experts(Model& m, int il, int T);
// moe_combine: the tile's weighted expert sum in top-k order, normed and projected up, plus the
// shared experts on x [n][E]: out [n][E].
void moe_combine(Model& m, const MoeWeights& w, const float* x, float* out, int r0, int n);

// The routed experts union_ids[0..n_union) of layer il (ascending, this process's) over their
// rows of the expert-sorted order (expert e's are rows first_slot[e] .. cursor[e], row s the
// latent input lat[slot_token[s]]), into the same rows of ex_out: acquired in batches the store
// allows, the next batch read while one computes. x: a decode step's MoE input, for the next
// layer's lookahead (null: none). moe_experts' local part, and a remote rank's whole work
// (engine/parallel).
Status routed_experts(Model& m, int il, int n_union, const float* x, int T, StageClock& clock);

}  // namespace k3
