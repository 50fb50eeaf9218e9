// Activations: the forward pass's scratch ("RunState"), allocated once at load, so the token
// loop never allocates. A pass of up to max_tokens tokens goes through the layers together
// (docs/performance.md, "Prefill passes"): what a token keeps from one layer to the next is sized
// per token of the pass, everything else per tile of tile_tokens (attention, KDA, projections,
// MLPs) or per group of expert_rows (the routed experts' inputs and gates), so a pass costs
// weights/chunk_size.h's PassCost::bytes. The float arrays take memory only where written
// (ZeroedArray): a decode step writes the first rows of arrays sized for the largest pass, and
// release_pass() gives a long pass's pages back.
#pragma once
#include <cstdint>
#include <vector>

#include "util/zeroed_pages.h"
#include "weights/chunk_size.h"
#include "weights/config.h"

namespace k3 {

// Steps of at most this many rows (decode steps, also of a batch) predict the next layer's experts.
inline constexpr int kLookaheadRows = 8;

struct Activations {
    Activations(const ModelConfig& cfg, int max_tokens);

    int max_tokens = 0;             // T below: tokens of a pass
    int tile_tokens = 0;            // Tt below: tokens of a tile
    int64_t expert_rows = 0;        // R below: (token, choice) rows of a group of expert work
    int64_t product_tokens = 0;     // the most tokens one weight product takes (Compute::reserve)
    int n_blocks_max = 0;

    // Runs later passes in tiles of `tile` tokens and expert groups of `rows` rows (at most
    // what was allocated): the bits do not change, which tests check with tiles that cut their
    // prompts (tests/model/test_prefill_pass.cpp).
    void narrow_tiles(int tile, int64_t rows);

    // Gives back the pages a pass of more than one tile wrote in its per-token arrays (they read
    // as zeros again), so the memory it borrowed returns to the cache (docs/performance.md,
    // "Prefill passes").
    void release_pass(int tokens);

    // ---- kept for the whole pass ----
    ZeroedArray<float> pref;        // [T][E]  running residual of the current block
    ZeroedArray<float> blocks;      // [T][n_blocks_max][E]  block snapshots
    ZeroedArray<float> lat;         // [T][L]         routed experts' latent input z
    ZeroedArray<float> ex_out;      // [T*top_k][L]   expert outputs, sorted by expert
    ZeroedArray<int32_t> sel;       // [T][top_k]     selected experts, in selection order
    ZeroedArray<float> sel_w;       // [T][top_k]     their weights
    ZeroedArray<int32_t> slot_of;   // [T][top_k]     row of (t, j) in the expert-sorted order
    ZeroedArray<int32_t> slot_token;  // [T*top_k]    the token of each expert-sorted row

    // ---- per tile (Tt rows; the tile's token t is row t - t0) ----
    ZeroedArray<float> h;           // [Tt][E]  mixed input of the current sub-layer
    ZeroedArray<float> x;           // [Tt][E]  normed input of a block
    ZeroedArray<float> out;         // [Tt][E]  attention or MLP output

    // ---- KDA ----
    ZeroedArray<float> kq, kk, kv, kg, kz;   // [Tt][P]  projections (q,k,v raw; g gate; z decay input)
    ZeroedArray<float> kf;                   // [Tt][D]  low-rank decay input
    ZeroedArray<float> kb;                   // [Tt][H]  beta logits
    ZeroedArray<float> ko;                   // [Tt][P]  gated head outputs
    ZeroedArray<float> kda_head;             // [threads][5][D]  one head's q, k, v, alpha, o of one token
                                             // (sized by Model for its thread count)

    // ---- MLA ----
    ZeroedArray<float> mq_a;        // [Tt][q_lora]
    ZeroedArray<float> mq;          // [Tt][H][nope + rope]
    ZeroedArray<float> mkv;         // [Tt][kv_lora + rope]
    ZeroedArray<float> mg;          // [Tt][H * v]
    ZeroedArray<float> mo;          // [Tt][H * v]
    ZeroedArray<float> mq_abs;      // [Tt][H][kv_lora + rope]  absorbed query (keys are latent rows)
    ZeroedArray<float> mctx;        // [Tt][H][kv_lora]         attention-weighted latent
    std::vector<int32_t> seq_of;    // [Tt]  which sequence of a batched tile a row belongs to

    // ---- dense MLP ----
    ZeroedArray<float> dgate, dup;  // [Tt][F]

    // ---- MoE ----
    ZeroedArray<float> router;      // [Tt][n_expert]  router logits
    ZeroedArray<float> lat_acc;     // [Tt][L]         weighted expert sum
    ZeroedArray<float> sgate, sup;  // [Tt][SI]  shared experts
    ZeroedArray<float> sout;        // [Tt][E]   shared experts' output
    std::vector<int32_t> n_assigned;   // [n_expert]  tokens routed to each expert in this pass
    std::vector<int32_t> first_slot;   // [n_expert]  its first row in the expert-sorted order
    std::vector<int32_t> union_ids;    // [n_expert]  experts used by the pass, ascending
    std::vector<int32_t> cursor;    // [n_expert]  fill position while sorting by expert
    ZeroedArray<float> ex_in;       // [R][L]  a group's expert inputs, sorted by expert
    ZeroedArray<float> ex_gate;     // [R][I]  gate, then SiTU-GLU output in place
    ZeroedArray<float> ex_up;       // [R][I]
    std::vector<const uint8_t*> expert_runs;  // [n_expert]
    ZeroedArray<float> router_c;    // [n_expert]  one token's corrected scores during selection

    // ---- next-layer lookahead (moe.cpp) ----
    ZeroedArray<float> ahead_scores;      // [kLookaheadRows][n_expert]  next layer's router on this layer's input
    std::vector<int32_t> ahead_sel;       // [kLookaheadRows][top_k]     experts it predicts
    ZeroedArray<float> ahead_w;           // [kLookaheadRows][top_k]
    std::vector<int32_t> ahead_union;     // [n_expert]  the prediction's distinct experts
    int ahead_n = 0;                      // how many
    int ahead_layer = -1;                 // the layer they were predicted for (-1: none pending)
    std::vector<int32_t> prefetch_ids;    // [n_expert]  the experts of this process a prefetch asks for

    // ---- output ----
    ZeroedArray<float> final_h;     // [Tt][E]
    ZeroedArray<float> logits;      // [rows][V]  lm_head output of a batch, grown on first use
};

}  // namespace k3
