// Activations: the forward pass's scratch ("RunState"), allocated once at load for a chunk of
// up to max_tokens tokens, so the token loop never allocates. T below is the chunk size.
#pragma once
#include <cstdint>
#include <vector>

#include "weights/config.h"

namespace k3 {

// Tokens per forward() chunk for this shape: up to 256 (a larger chunk reads each weight once
// for more tokens and gives each routed expert more tokens per acquisition), but no more than
// keeps the activations near 256 MB (Kimi K3: about 100 tokens).
int chunk_tokens_for(const ModelConfig& cfg);

struct Activations {
    Activations(const ModelConfig& cfg, int max_tokens);

    int max_tokens = 0;
    int n_blocks_max = 0;

    // ---- residual stream and attention residuals ----
    std::vector<float> pref;        // [T][E]  running residual of the current block
    std::vector<float> h;           // [T][E]  mixed input of the current sub-layer
    std::vector<float> x;           // [T][E]  normed input of a block
    std::vector<float> out;         // [T][E]  attention or MLP output
    std::vector<float> blocks;      // [T][n_blocks_max][E]  block snapshots

    // ---- KDA ----
    std::vector<float> kq, kk, kv, kg, kz;   // [T][P]  projections (q,k,v raw; g gate; z decay input)
    std::vector<float> kf;                   // [T][D]  low-rank decay input
    std::vector<float> kb;                   // [T][H]  beta logits
    std::vector<float> ko;                   // [T][P]  gated head outputs
    std::vector<float> kda_head;             // [threads][5][D]  one head's q, k, v, alpha, o of one token
                                             // (sized by Model for its thread count)

    // ---- MLA ----
    std::vector<float> mq_a;        // [T][q_lora]
    std::vector<float> mq;          // [T][H][nope + rope]
    std::vector<float> mkv;         // [T][kv_lora + rope]
    std::vector<float> mg;          // [T][H * v]
    std::vector<float> mo;          // [T][H * v]
    std::vector<float> mq_abs;      // [T][H][kv_lora + rope]  absorbed query (keys are latent rows)
    std::vector<float> mctx;        // [T][H][kv_lora]         attention-weighted latent
    std::vector<int32_t> seq_of;    // [T]  which sequence of a batched chunk a row belongs to

    // ---- dense MLP ----
    std::vector<float> dgate, dup;  // [T][F]

    // ---- MoE ----
    std::vector<float> router;      // [T][n_expert]  router logits
    std::vector<int32_t> sel;       // [T][top_k]     selected experts, in selection order
    std::vector<float> sel_w;       // [T][top_k]     their weights
    std::vector<float> lat;         // [T][L]         latent input z
    std::vector<float> lat_acc;     // [T][L]         weighted expert sum
    std::vector<int32_t> n_assigned;   // [n_expert]  tokens routed to each expert in this chunk
    std::vector<int32_t> first_slot;   // [n_expert]  its first row in the expert-sorted order
    std::vector<int32_t> union_ids;    // [n_expert]  experts used by the chunk, ascending
    std::vector<int32_t> slot_of;      // [T][top_k]  row of (t, j) in the expert-sorted order
    std::vector<float> ex_in;       // [T*top_k][L]  expert inputs, sorted by expert
    std::vector<float> ex_gate;     // [T*top_k][I]  gate, then SiTU-GLU output in place
    std::vector<float> ex_up;       // [T*top_k][I]
    std::vector<float> ex_out;      // [T*top_k][L]
    std::vector<const uint8_t*> expert_runs;  // [n_expert]
    std::vector<float> sgate, sup;  // [T][SI]  shared experts
    std::vector<float> sout;        // [T][E]   shared experts' output
    std::vector<int32_t> cursor;    // [n_expert]  fill position while sorting by expert
    std::vector<float> router_c;    // [n_expert]  one token's corrected scores during selection

    // ---- output ----
    std::vector<float> final_h;     // [T][E]
    std::vector<float> logits;      // [T][V]  lm_head output of a batched chunk, grown on first use
};

}  // namespace k3
