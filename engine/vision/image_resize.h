// Pillow's Image.resize((w, h), BICUBIC) as the release calls it (docs/model.md "Preprocessing": resizing): an exact
// copy at the same size; NEAREST for modes "1" and "P" (Pillow switches silently); bicubic over
// premultiplied alpha for "LA" and "RGBA"; 8-bit separable bicubic (Keys a = -0.5, support
// widened when shrinking, weights in 22-bit fixed point), horizontal pass first.
#pragma once
#include "vision/image_decode.h"

namespace k3::vision {

DecodedImage pillow_resize(const DecodedImage& in, int width, int height);

}  // namespace k3::vision
