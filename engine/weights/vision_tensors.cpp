// The vision tensor list (docs/model.md "The vision config and tensors"): every weight of the MoonViT-V2 tower and the
// PatchMergerMLPV2 projector, all bf16, no biases. Linear weights are [out][in].
#include "weights/model_tensors.h"

namespace k3 {

std::vector<TensorSpec> vision_tensors(const ModelConfig& cfg) {
    std::vector<TensorSpec> t;
    const VisionConfig& v = cfg.vision;
    if (!v.present) return t;
    auto add = [&](std::string name, std::vector<int64_t> shape) {
        t.push_back(TensorSpec{std::move(name), DType::BF16, std::move(shape), TensorRole::Vision});
    };
    const int64_t D = v.hidden, A = v.qkv_hidden, F = v.intermediate, M = v.merged_width(), H = v.text_hidden;
    add(kProjectorPrefix + "proj.0.weight", {M, M});
    add(kProjectorPrefix + "proj.2.weight", {H, M});
    add(kProjectorPrefix + "post_norm.weight", {H});
    add(kVisionTowerPrefix + "patch_embed.proj.weight", {D, 3, v.patch_size, v.patch_size});
    add(kVisionTowerPrefix + "patch_embed.pos_emb.weight", {v.pos_emb_height, v.pos_emb_width, D});
    for (int b = 0; b < v.layers; ++b) {
        const std::string p = kVisionTowerPrefix + "encoder.blocks." + std::to_string(b) + ".";
        add(p + "norm0.weight", {D});
        add(p + "wqkv.weight", {3 * A, D});
        add(p + "wo.weight", {D, A});
        add(p + "norm1.weight", {D});
        add(p + "mlp.fc0.weight", {F, D});
        add(p + "mlp.fc1.weight", {D, F});
    }
    add(kVisionTowerPrefix + "encoder.final_layernorm.weight", {D});
    return t;
}

}  // namespace k3
