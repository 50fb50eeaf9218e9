// Weight binding: where every tensor of a layer sits inside that layer's run (computed once at
// load from Checkpoint::offset_in_layer), and the typed views the blocks read (layer_views.h).
// Both are driven by the layer tensor table (layer_tensors.h). Matrices are used in place as
// bf16 straight from the run bytes; the small vectors (norm gains, attention-residual folds,
// conv taps, decay rates, dt_bias, router bias) are widened to fp32 once, the first time the
// layer's bytes are seen, and kept: they depend only on the layer's bytes, which never change,
// so a streamed layer re-read into another buffer binds to the same fp32 copies.
#pragma once
#include <cstdint>
#include <vector>

#include "weights/checkpoint.h"
#include "weights/layer_views.h"

namespace k3 {

// Where one row of the layer tensor table sits in a layer's run, with its dtype and element
// count as the checkpoint stores them. offset < 0: the layer does not bind that row.
struct PlacedTensor {
    int64_t offset = -1;
    DType dtype = DType::F32;
    int64_t numel = 0;
};

// Everything about one layer's run that is known before its bytes are read.
struct LayerLayout {
    int il = 0;
    int64_t run_bytes = 0;
    std::vector<PlacedTensor> rows;  // [layer_tensor_table().size()]
};

// The fp32 copies of one layer's small vectors (filled by widen_layer_vectors).
struct LayerVectors {
    bool ready = false;
    std::vector<std::vector<float>> rows;  // by table row; empty for matrices and folded scales
    std::vector<float> scratch;            // widening room for the folded scales and A_log
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
