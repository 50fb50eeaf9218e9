// The vision tower's and projector's weights held in memory (docs/model.md "The vision config
// and tensors"): the matrices stay bf16 as the release stores them (the bf16
// kernels widen them exactly), the gains and the position table are widened to fp32 once.
// About 0.9 GB for Kimi K3, counted by the memory plan (MemoryPlan::vision_bytes).
#pragma once
#include <cstdint>
#include <vector>

#include "util/aligned_bytes.h"
#include "weights/checkpoint.h"

namespace k3 {

struct VisionBlockWeights {
    std::vector<float> norm0, norm1;  // [D] RMSNorm gains
    AlignedBytes wqkv;                // bf16 [3A][D]: Q rows 0..A-1, then K, then V
    AlignedBytes wo;                  // bf16 [D][A]
    AlignedBytes fc0;                 // bf16 [F][D]
    AlignedBytes fc1;                 // bf16 [D][F]
};

struct VisionWeights {
    VisionConfig cfg;
    AlignedBytes patch_embed;         // bf16 [D][3 * p * p]: the conv kernel as a matrix
    std::vector<float> pos_table;     // [pos_h][pos_w][D]
    std::vector<VisionBlockWeights> blocks;
    std::vector<float> final_norm;    // [D]
    AlignedBytes proj0;               // bf16 [4D][4D]
    AlignedBytes proj2;               // bf16 [H][4D]
    std::vector<float> post_norm;     // [H]
};

inline const uint16_t* bf16(const AlignedBytes& b) { return reinterpret_cast<const uint16_t*>(b.data()); }

// Reads every tensor of vision_tensors(ckpt.config) (check_vision_tensors() has vouched for
// their names, dtypes and shapes). Requires ckpt.config.vision.present.
VisionWeights load_vision_weights(const Checkpoint& ckpt);

}  // namespace k3
