// The typed views the blocks read for one decoder layer: pointers into the layer's run (bf16
// matrices, used in place) or into the layer's fp32 copies of its small vectors. Filled by
// bind_layer (weights.h) from the layer tensor table (layer_tensors.h).
#pragma once
#include <cstdint>

namespace k3 {

struct KdaWeights {
    const uint16_t *q, *k, *v;       // [P][E] bf16
    const uint16_t *f_a;             // [D][E]   low-rank decay input
    const uint16_t *f_b;             // [P][D]
    const uint16_t *b;               // [H][E]   beta logits
    const uint16_t *g;               // [P][E]   full-rank output gate
    const uint16_t *o;               // [E][P]
    const float *conv_q, *conv_k, *conv_v;  // [P][K] causal depthwise taps
    const float *decay_rate;         // [H]  exp(A_log[h]), A_log indexed by head
    const float *dt_bias;            // [P]
    const float *o_norm;             // [D]  head RMSNorm gain, shared by heads
};

struct MlaWeights {
    const uint16_t *q_a;             // [q_lora][E]
    const uint16_t *q_b;             // [H * (nope + rope)][q_lora]
    const uint16_t *kv_a;            // [kv_lora + rope][E]
    const uint16_t *kv_b;            // [H * (nope + v)][kv_lora]
    const uint16_t *o;               // [E][H * v]
    const uint16_t *g;               // [H * v][E]   output gate
    const float *q_a_norm;           // [q_lora]
    const float *kv_a_norm;          // [kv_lora]
};

struct DenseWeights {
    const uint16_t *gate, *up;       // [F][E]
    const uint16_t *down;            // [E][F]
};

struct MoeWeights {
    const uint16_t *router;          // [n_expert][E]
    const uint16_t *latent_down;     // [L][E]
    const uint16_t *latent_up;       // [E][L]
    const uint16_t *shared_gate, *shared_up;  // [SI][E]
    const uint16_t *shared_down;     // [E][SI]
    const float *router_bias;        // [n_expert]  e_score_correction_bias (selection only)
    const float *latent_norm;        // [L]         routed_expert_norm
};

// Views a layer does not hold (KDA views of an MLA layer, ...) stay null.
struct LayerWeights {
    const float *input_norm;         // [E]
    const float *post_norm;          // [E]
    const float *fold_attn;          // [E]  self_attention_res_norm ⊙ self_attention_res_proj
    const float *fold_mlp;           // [E]  mlp_res_norm ⊙ mlp_res_proj
    KdaWeights kda{};
    MlaWeights mla{};
    DenseWeights dense{};
    MoeWeights moe{};
};

// One routed expert's six tensors inside its run (MXFP4: packed [rows][in/2], scales [rows][in/32]).
struct ExpertWeights {
    const uint8_t *w1_packed, *w1_scale;   // gate: [I][L]
    const uint8_t *w2_packed, *w2_scale;   // down: [L][I]
    const uint8_t *w3_packed, *w3_scale;   // up:   [I][L]
};

}  // namespace k3
