// The 2x2 space-to-depth merge and PatchMergerMLPV2 (docs/model.md "Merge and projector"): merged
// row m = R (gw/2) + C holds the tower's rows of patches (2R+dr, 2C+dc) in slot k = 2 dr + dc,
// then z = RMSNorm(GELU_erf(u proj.0^T) proj.2^T; post_norm, projector_ln_eps).
#pragma once
#include <cstdint>
#include <vector>

#include "model/compute.h"
#include "vision/vision_weights.h"

namespace k3 {

// [gh/2 * gw/2][4D] from the tower's [gh * gw][D] (gh, gw even).
std::vector<float> merge_2x2(const std::vector<float>& y, int gh, int gw, int64_t D);

// [N][H] from the merged rows [N][4D].
std::vector<float> project_rows(const VisionWeights& w, const Compute& cp, const std::vector<float>& merged, int64_t N,
                                int64_t max_tokens);

}  // namespace k3
