// Activations: the forward pass's scratch ("RunState"), allocated once at load for a chunk of
// up to max_tokens tokens, so the token loop never allocates. T below is the chunk size. The
// float arrays take memory only where written (ZeroedArray): a decode step writes the first
// rows of arrays sized for the largest prefill chunk.
#pragma once
#include <cstdint>
#include <vector>

#include "util/zeroed_pages.h"
#include "weights/chunk_size.h"
#include "weights/config.h"

namespace k3 {

// chunk_tokens_for, activation_bytes_per_token: weights/chunk_size.h

// Steps of at most this many rows (decode steps, also of a batch) predict the next layer's experts.
inline constexpr int kLookaheadRows = 8;

struct Activations {
    Activations(const ModelConfig& cfg, int max_tokens);

    int max_tokens = 0;
    int n_blocks_max = 0;

    // ---- residual stream and attention residuals ----
    ZeroedArray<float> pref;        // [T][E]  running residual of the current block
    ZeroedArray<float> h;           // [T][E]  mixed input of the current sub-layer
    ZeroedArray<float> x;           // [T][E]  normed input of a block
    ZeroedArray<float> out;         // [T][E]  attention or MLP output
    ZeroedArray<float> blocks;      // [T][n_blocks_max][E]  block snapshots

    // ---- KDA ----
    ZeroedArray<float> kq, kk, kv, kg, kz;   // [T][P]  projections (q,k,v raw; g gate; z decay input)
    ZeroedArray<float> kf;                   // [T][D]  low-rank decay input
    ZeroedArray<float> kb;                   // [T][H]  beta logits
    ZeroedArray<float> ko;                   // [T][P]  gated head outputs
    ZeroedArray<float> kda_head;             // [threads][5][D]  one head's q, k, v, alpha, o of one token
                                             // (sized by Model for its thread count)

    // ---- MLA ----
    ZeroedArray<float> mq_a;        // [T][q_lora]
    ZeroedArray<float> mq;          // [T][H][nope + rope]
    ZeroedArray<float> mkv;         // [T][kv_lora + rope]
    ZeroedArray<float> mg;          // [T][H * v]
    ZeroedArray<float> mo;          // [T][H * v]
    ZeroedArray<float> mq_abs;      // [T][H][kv_lora + rope]  absorbed query (keys are latent rows)
    ZeroedArray<float> mctx;        // [T][H][kv_lora]         attention-weighted latent
    std::vector<int32_t> seq_of;    // [T]  which sequence of a batched chunk a row belongs to

    // ---- dense MLP ----
    ZeroedArray<float> dgate, dup;  // [T][F]

    // ---- MoE ----
    ZeroedArray<float> router;      // [T][n_expert]  router logits
    std::vector<int32_t> sel;       // [T][top_k]     selected experts, in selection order
    ZeroedArray<float> sel_w;       // [T][top_k]     their weights
    ZeroedArray<float> lat;         // [T][L]         latent input z
    ZeroedArray<float> lat_acc;     // [T][L]         weighted expert sum
    std::vector<int32_t> n_assigned;   // [n_expert]  tokens routed to each expert in this chunk
    std::vector<int32_t> first_slot;   // [n_expert]  its first row in the expert-sorted order
    std::vector<int32_t> union_ids;    // [n_expert]  experts used by the chunk, ascending
    std::vector<int32_t> slot_of;      // [T][top_k]  row of (t, j) in the expert-sorted order
    ZeroedArray<float> ex_in;       // [T*top_k][L]  expert inputs, sorted by expert
    ZeroedArray<float> ex_gate;     // [T*top_k][I]  gate, then SiTU-GLU output in place
    ZeroedArray<float> ex_up;       // [T*top_k][I]
    ZeroedArray<float> ex_out;      // [T*top_k][L]
    std::vector<const uint8_t*> expert_runs;  // [n_expert]
    ZeroedArray<float> sgate, sup;  // [T][SI]  shared experts
    ZeroedArray<float> sout;        // [T][E]   shared experts' output
    std::vector<int32_t> cursor;    // [n_expert]  fill position while sorting by expert
    ZeroedArray<float> router_c;    // [n_expert]  one token's corrected scores during selection

    // ---- next-layer lookahead (moe.cpp) ----
    ZeroedArray<float> ahead_scores;      // [kLookaheadRows][n_expert]  next layer's router on this layer's input
    std::vector<int32_t> ahead_sel;       // [kLookaheadRows][top_k]     experts it predicts
    ZeroedArray<float> ahead_w;           // [kLookaheadRows][top_k]
    std::vector<int32_t> ahead_union;     // [n_expert]  the prediction's distinct experts
    int ahead_n = 0;                      // how many
    int ahead_layer = -1;                 // the layer they were predicted for (-1: none pending)

    // ---- output ----
    ZeroedArray<float> final_h;     // [T][E]
    ZeroedArray<float> logits;      // [T][V]  lm_head output of a batched chunk, grown on first use
};

}  // namespace k3
