// Image input, the engine's side of it: a PNG or JPEG file's bytes -> the tower's patches
// (docs/model.md "Preprocessing"). Decoding, the NaViT size
// rule, Pillow-exact bicubic resizing (only when the rule shrinks the image), transparency onto
// the 8-px chessboard, zero padding to multiples of 28, normalisation and patchifying. The
// server checks the limits and the API shapes; the engine turns patches into rows
// (Engine::encode_image).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace k3 {

// What one image may cost before it is decoded (each refusal is a k3::Error(Usage) naming it).
struct ImageLimits {
    int64_t max_bytes = 20ll << 20;       // encoded file size
    int64_t max_pixels = 50'000'000;      // stored width x height (a decompression-bomb bound)
};

// The preprocessing constants of the release's preprocessor_config.json (docs/model.md "The vision
// config and tensors").
struct ImageSettings {
    int patch_size = 14;
    int merge = 2;
    int in_patch_limit = 65536;
    int patch_limit_on_one_side = 512;
};

// The NaViT size rule (docs/model.md "Preprocessing") for a stored width x height.
struct ImageGeometry {
    int width = 0, height = 0;            // stored (the prompt writes "image {width}x{height}")
    int resized_width = 0, resized_height = 0;  // W', H' (equal to the stored size unless shrunk)
    int padded_width = 0, padded_height = 0;    // multiples of patch * merge
    int grid_h = 0, grid_w = 0;           // patches per column and row
    int64_t patches() const { return int64_t(grid_h) * grid_w; }
    int64_t rows() const { return patches() / 4; }  // projected rows after the 2x2 merge
};
ImageGeometry image_geometry(int width, int height, const ImageSettings& s = {});

struct PreparedImage {
    ImageGeometry geometry;
    std::vector<float> patches;  // [patches][3][p][p], normalised (v/255 - 0.5) / 0.5, row-major patch grid
    uint64_t content_hash = 0;   // of the decoded pixels and the settings: the prompt cache's key
};

// Decodes and preprocesses one PNG or JPEG. Throws k3::Error(Usage) for data that is neither,
// is truncated or corrupt, exceeds `limits`, or uses what is not supported (CMYK JPEG, 16-bit
// greyscale PNG), each message saying which.
PreparedImage prepare_image(std::span<const uint8_t> bytes, const ImageLimits& limits = {},
                            const ImageSettings& settings = {});

}  // namespace k3
