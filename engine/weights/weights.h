// Weight binding: where every tensor of a layer sits inside that layer's run (computed once at
// load from Checkpoint::offset_in_layer), and the typed views the blocks read. Matrices are used
// in place as bf16 straight from the run bytes; the small vectors (norm gains, attention-residual
// folds, conv taps, decay rates, dt_bias, router bias) are widened to fp32 once, the first time
// the layer's bytes are seen, and kept: they depend only on the layer's bytes, which never
// change, so a streamed layer re-read into another buffer binds to the same fp32 copies.
#pragma once
#include <cstdint>
#include <vector>

#include "weights/checkpoint.h"

namespace k3 {

// ---- views the blocks use (pointers into the run, or into the fp32 copies) ----

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

// ---- binding ----

// A small vector of the run to widen: where it is, its dtype, and how many elements.
struct SmallTensor {
    int64_t offset = 0;
    DType dtype = DType::F32;
    int64_t numel = 0;
};

// Everything about one layer's run that is known before its bytes are read.
struct LayerLayout {
    int il = 0;
    int64_t run_bytes = 0;
    // Offsets (bytes from the run start) of the bf16 matrices, by role; -1 when absent.
    int64_t q = -1, k = -1, v = -1, f_a = -1, f_b = -1, b = -1, g = -1, o = -1;   // KDA (g, o shared with MLA)
    int64_t q_a = -1, q_b = -1, kv_a = -1, kv_b = -1;                            // MLA
    int64_t dense_gate = -1, dense_up = -1, dense_down = -1;                     // dense MLP
    int64_t router = -1, latent_down = -1, latent_up = -1, shared_gate = -1, shared_up = -1, shared_down = -1;
    // Small vectors, widened into LayerVectors.
    SmallTensor input_norm, post_norm, attn_res_norm, attn_res_proj, mlp_res_norm, mlp_res_proj;
    SmallTensor conv_q, conv_k, conv_v, a_log, dt_bias, o_norm;                  // KDA
    SmallTensor q_a_norm, kv_a_norm;                                             // MLA
    SmallTensor router_bias, latent_norm;                                        // MoE
};

// The fp32 copies of one layer's small vectors (filled by widen_layer_vectors).
struct LayerVectors {
    bool ready = false;
    std::vector<float> input_norm, post_norm, fold_attn, fold_mlp;
    std::vector<float> conv_q, conv_k, conv_v, decay_rate, dt_bias, o_norm;
    std::vector<float> q_a_norm, kv_a_norm;
    std::vector<float> router_bias, latent_norm;
    std::vector<float> scratch;  // widening room for the proj vectors and A_log
};

// Computes every layer's layout; throws k3::Error(Checkpoint) for a tensor the layer run does
// not hold or a bf16 matrix that is not 2-byte aligned inside it.
std::vector<LayerLayout> layout_layers(const Checkpoint& ckpt);

// Sizes every vector of `vec` for the layer (at load, so the first token does not allocate).
void size_layer_vectors(const ModelConfig& cfg, const LayerLayout& lay, LayerVectors& vec);
// Widens the small vectors of a layer from its run bytes (no-op once `vec.ready`).
void widen_layer_vectors(const ModelConfig& cfg, const LayerLayout& lay, const uint8_t* run, LayerVectors& vec);

// Typed views of one layer: matrices point into `run`, small vectors into `vec`.
LayerWeights bind_layer(const LayerLayout& lay, const uint8_t* run, const LayerVectors& vec);

ExpertWeights bind_expert(const ExpertRun& layout, const uint8_t* run);

// Widens n elements of dtype `dt` at `src` (any alignment) into dst.
void widen_to_f32(const uint8_t* src, DType dt, int64_t n, float* dst);

}  // namespace k3
