// The one tensor list: every tensor a Kimi K3 checkpoint must hold for a given ModelConfig,
// with its checkpoint name, dtype and shape, in the release's storage order (each layer's trunk
// tensors, then that layer's routed experts; model-level tensors last). Loading, `verify`,
// `inspect`, `make-model` and `pack-trunk` all walk this list, so names live here only.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "weights/config.h"

namespace k3 {

enum class DType { BF16, F16, F32, U8 };

const char* dtype_name(DType dt);      // "BF16", "F16", "F32", "U8" (safetensors spelling)
int dtype_size(DType dt);              // bytes per element

enum class TensorRole {
    Embed,         // embed_tokens.weight
    LmHead,        // language_model.lm_head.weight
    ModelNorm,     // norm.weight, output_attn_res_{norm,proj}.weight
    LayerTrunk,    // any non-expert tensor of layers.L (norms, attention, router, latent, shared, dense)
    ExpertPacked,  // experts.E.w{1,2,3}.weight_packed (U8, two E2M1 nibbles per byte)
    ExpertScale,   // experts.E.w{1,2,3}.weight_scale  (U8, E8M0, one per 32 inputs)
    Vision,        // vision_tower.* and mm_projector.* (vision_tensors(); not in model_tensors())
};

struct TensorSpec {
    std::string name;              // full checkpoint name
    DType dtype;
    std::vector<int64_t> shape;
    TensorRole role;
    int layer = -1;                // zero-based, for LayerTrunk and expert tensors
    int expert = -1;               // for expert tensors
    int64_t numel() const;
    int64_t nbytes() const { return numel() * dtype_size(dtype); }
};

inline const std::string kModelPrefix = "language_model.model.";
inline const std::string kLmHeadName = "language_model.lm_head.weight";

// "language_model.model.layers.{il}."
std::string layer_prefix(int il);
// "language_model.model.layers.{il}.block_sparse_moe.experts.{ie}."
std::string expert_prefix(int il, int ie);

// All tensors in storage order.
std::vector<TensorSpec> model_tensors(const ModelConfig& cfg);
// The trunk tensors of one layer (storage order), and the six tensors of one expert
// (w1 packed, w1 scale, w2 packed, w2 scale, w3 packed, w3 scale).
std::vector<TensorSpec> layer_trunk_tensors(const ModelConfig& cfg, int il);
std::vector<TensorSpec> expert_tensors(const ModelConfig& cfg, int il, int ie);

// The image side's 12 kinds of tensor (docs/model.md "The vision config and tensors"), in the release's storage order:
// projector first, then the tower (patch embedding, blocks, final norm). Empty without a
// vision_config. Kept apart from model_tensors() so the language model's stores, plans and
// packs never see them and `--no-vision` need not read them.
std::vector<TensorSpec> vision_tensors(const ModelConfig& cfg);
inline const std::string kVisionTowerPrefix = "vision_tower.";
inline const std::string kProjectorPrefix = "mm_projector.";

// "[3072, 1792]": a shape as messages print it.
std::string shape_string(const std::vector<int64_t>& shape);

// Bytes of one whole routed expert (its six tensors back to back).
int64_t expert_bytes(const ModelConfig& cfg);

}  // namespace k3
