// The tower's two position signals (docs/model.md "The tower"): the learned table
// resized to the patch grid as PyTorch's bilinear interpolate does (align_corners false, no
// antialias), and the 2-D RoPE angles, even pair slots rotated by the column, odd ones by the row
// (the released code's orientation, not its docstring's; docs/model.md "Image input").
#pragma once
#include <cstdint>
#include <vector>

namespace k3 {

// [gh][gw][D] from the table [th][tw][D].
std::vector<float> interpolate_position_table(const std::vector<float>& table, int th, int tw, int64_t D, int gh,
                                              int gw);

// cos and sin of every rotation, [gh * gw][head_dim / 2] each, patch-major (row-major grid):
// pair k of a head is rotated by column * theta_{k/2} when k is even, by row * theta_{k/2} when
// odd, theta_j = 10000^(-4j / head_dim), all in float32 as the release computes them.
struct RopeTable {
    std::vector<float> cos, sin;
    int pairs = 0;
};
RopeTable rope_table_2d(int gh, int gw, int head_dim);

}  // namespace k3
