// The tower's self-attention over one image's patches (docs/model.md "The tower": a block):
// RoPE on q and k, then softmax(q k^T / sqrt(dh)) v per head, bidirectional over all L patches.
// Blocked so a 1920x1080 image (10,764 patches) never holds an L x L score matrix: work items
// are (head, tile of up to 16 queries), folding the head's keys 64 at a time into an online
// softmax (the language model's attend_block kernel); keys and values of a head are copied
// contiguous once so every block streams them.
#pragma once
#include <cstdint>

#include "model/compute.h"
#include "vision/vision_position.h"

namespace k3 {

// qkv [L][3A] (A = heads * dh; Q, K, V column blocks, head n at columns [n dh, (n+1) dh) of
// each) is rotated in place; out [L][A] receives the heads' outputs, head-major per row.
void vision_attention(const Compute& cp, float* qkv, int64_t L, int heads, int dh, const RopeTable& rope, float* out);

}  // namespace k3
