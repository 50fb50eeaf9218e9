// MoonViT-V2, the 2x2 merge and the PatchMergerMLPV2 projector on the engine's kernels and
// threads (docs/model.md "The tower", "Merge and projector"): one prepared
// image's patches -> the N rows that replace its <|media_pad|> in the language model's input.
// Activations are fp32, the bf16 weights are widened exactly by the kernels, so the result is
// more precise than the release's bf16 run; the same image gives the same bits at any thread
// count (every output element is produced by one kernel call, compute.h).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "k3/image.h"
#include "model/compute.h"
#include "vision/vision_weights.h"

namespace k3 {

// What the release leaves to the PyTorch version: the tower's RMSNorm epsilon (docs/model.md "The tower").
struct VisionSettings {
    float norm_eps = kVisionEpsTorch27;
};

// The intermediate results a test may look at (all fp32, row-major).
struct VisionTrace {
    std::vector<float> embedded;   // [L][D] patch embedding + interpolated position table
    std::vector<float> tower_out;  // [L][D] after the final norm
    std::vector<float> merged;     // [N][4D] the 2x2 merge, the projector's input
};

// Rows [N][text_hidden] for an image of geometry `g` whose patches are `patches`
// ([L][3][p][p], prepare_image's layout). `max_tokens` bounds the tokens per weight product
// (the Compute's reserved scratch).
std::vector<float> encode_image_rows(const VisionWeights& w, const Compute& cp, int64_t max_tokens,
                                     const ImageGeometry& g, std::span<const float> patches,
                                     const VisionSettings& s = {}, VisionTrace* trace = nullptr);

// Y[t] = X[t] W^T for t < T, in chunks of at most max_tokens tokens.
void vision_matmul(const Compute& cp, const uint16_t* W, const float* X, float* Y, int64_t rows, int64_t cols,
                   int64_t T, int64_t max_tokens);

}  // namespace k3
