// The Kimi K3 model on CPU: what is fixed after load (config, kernels and threads, weight
// layouts and the resident model-level tensors, scratch) and forward(), which evaluates a chunk
// of tokens for one sequence. blocks.h has the per-block functions forward() calls.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "model/activations.h"
#include "weights/checkpoint.h"
#include "model/compute.h"
#include "k3/status.h"
#include "model/state.h"
#include "model/trace.h"
#include "util/aligned_bytes.h"
#include "store/weight_store.h"
#include "weights/weights.h"

namespace k3 {

struct Model {
    Model(const Checkpoint& ckpt, const Kernels& k, int n_threads, WeightStore& store);

    const Checkpoint& ckpt;
    const ModelConfig& cfg;
    Compute compute;
    WeightStore& store;
    std::vector<LayerLayout> layouts;     // [n_layer]
    std::vector<LayerVectors> vectors;    // [n_layer] fp32 small vectors, filled on first use

    // Model-level tensors, always resident.
    AlignedBytes embed;                   // [V][E] bf16
    AlignedBytes lm_head;                 // [V][E] bf16
    std::vector<float> final_norm;        // [E]
    std::vector<float> fold_out;          // [E]  output_attn_res_norm ⊙ output_attn_res_proj

    Activations act;

    // When set, forward() hands it every named intermediate (trace.h); tests attach one.
    Trace* trace = nullptr;
};

// Evaluates tokens (at most m.act.max_tokens, chunk_tokens_for(cfg)) at positions st.n_past..., advancing the KDA state
// and writing MLA latent rows; on success st.n_past grows by tokens.size(). logits receives the
// last token's logits [V], or every token's [T][V] when all_logits, or nothing when null. Checks `cancel` between
// layers. On failure (Cancelled, IoError) the state is partly advanced and must be restored by
// the caller (Session rolls back to a snapshot).
Status forward(Model& m, SequenceState& st, std::span<const int32_t> tokens, float* logits, bool all_logits,
               const CancelFlag* cancel);

}  // namespace k3
