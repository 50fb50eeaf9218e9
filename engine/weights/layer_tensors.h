// The one description of a decoder layer's tensors (docs/model.md "Tensor names"): for every tensor
// a layer may hold, its name, which layers hold it, its dtype and shape in the release, and how the
// forward pass uses it (a bf16 matrix read in place, or a small vector widened to fp32 once) with
// the view it fills. The tensor list (model_tensors.h: loading, verify, inspect, make-model,
// pack-trunk), the layer layout, the fp32 widening and the bound views (weights.h) all walk this
// table, so a new layer tensor is one row here (plus a field in layer_views.h if a block reads it).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "weights/config.h"
#include "weights/layer_views.h"
#include "weights/model_tensors.h"

namespace k3 {

// Which layers hold a tensor.
enum class LayerPart {
    All,
    Kda,           // KDA attention layers
    Mla,           // MLA attention layers
    Dense,         // layers il < first_k_dense_replace (dense MLP)
    Moe,           // the other layers (latent MoE)
    SharedExpert,  // MoE layers; stored even when there are no shared experts ([0][E]), bound only when there are
};

enum class TensorUse {
    Matrix,        // bf16 [out][in], used in place from the layer's run
    Vector,        // small vector, widened to fp32 once
    ScalesAbove,   // widened and multiplied into the Vector of the row just above (norm ⊙ proj folds)
    ExpPerHead,    // widened; keeps exp() of the first kda_num_heads entries (A_log -> decay rate)
};

struct LayerTensor {
    const char* suffix;                              // name after "language_model.model.layers.{il}."
    LayerPart part;
    DType dtype;                                     // as the release stores it
    std::vector<int64_t> (*shape)(const ModelConfig&);
    TensorUse use;
    const uint16_t** (*matrix_view)(LayerWeights&);  // Matrix rows: the view it fills
    const float** (*vector_view)(LayerWeights&);     // Vector and ExpPerHead rows: the view it fills
};

// Every tensor a layer may hold, in the release's storage order.
std::span<const LayerTensor> layer_tensor_table();

// Whether layer il stores tensors of `part`, and whether the forward pass binds them.
bool layer_holds(const ModelConfig& c, int il, LayerPart part);
bool layer_binds(const ModelConfig& c, int il, LayerPart part);

}  // namespace k3
