// prepare_image (k3/image.h): decode, the NaViT size rule, Pillow's resize, transparency onto
// the chessboard, zero padding, normalisation and patches, in the release's order
// (docs/model.md "Preprocessing"; the fill stage is "after_resize").
#include <algorithm>
#include <cmath>
#include <cstring>

#include "k3/error.h"
#include "k3/fnv1a.h"
#include "k3/image.h"
#include "vision/image_decode.h"
#include "vision/image_resize.h"

namespace k3 {

ImageGeometry image_geometry(int W, int H, const ImageSettings& s) {
    ImageGeometry g;
    g.width = W, g.height = H;
    const int p = s.patch_size, side = s.patch_limit_on_one_side * p;
    // In IEEE double and this order, as navit_resize_image computes it (floored patch counts).
    const double s1 = std::sqrt(double(s.in_patch_limit) / (double(std::max(1, W / p)) * double(std::max(1, H / p))));
    const double s2 = double(side) / W, s3 = double(side) / H;
    const double scale = std::min({1.0, s1, s2, s3});
    g.resized_width = std::min(std::max(1, int(W * scale)), side);
    g.resized_height = std::min(std::max(1, int(H * scale)), side);
    const int f = s.merge * p;
    g.padded_width = g.resized_width + (f - g.resized_width % f) % f;
    g.padded_height = g.resized_height + (f - g.resized_height % f) % f;
    g.grid_w = g.padded_width / p;
    g.grid_h = g.padded_height / p;
    return g;
}

namespace {

using vision::DecodedImage;
using vision::PixelMode;

// The 8-px chessboard behind transparent pixels: white 255 where (x/8 + y/8) is even (the
// top-left square), grey 180 where odd (preprocessor_config.json transparent_bg_config).
uint8_t chessboard(int x, int y) { return ((x / 8 + y / 8) % 2) ? 180 : 255; }

// alpha * rgb + (1 - alpha) * bg in float32, truncated (fill_transparent_bg_with).
uint8_t over(uint8_t c, uint8_t a, uint8_t bg) {
    const float alpha = float(a) / 255.0f;
    const float v = alpha * float(c) + (1.0f - alpha) * float(bg);
    return uint8_t(v);
}

// The image as RGB after the fill stage (docs/model.md "Preprocessing": transparency).
std::vector<uint8_t> to_rgb(const DecodedImage& im) {
    const size_t n = size_t(im.width) * size_t(im.height);
    std::vector<uint8_t> rgb(n * 3);
    for (size_t i = 0; i < n; ++i) {
        const int x = int(i % size_t(im.width)), y = int(i / size_t(im.width));
        uint8_t r = 0, g = 0, b = 0, a = 255;
        const uint8_t* px = &im.pixels[i * size_t(vision::channels_of(im.mode))];
        switch (im.mode) {
            case PixelMode::RGB: r = px[0], g = px[1], b = px[2]; break;
            case PixelMode::RGBA: r = px[0], g = px[1], b = px[2], a = px[3]; break;
            case PixelMode::L:
            case PixelMode::One:
                r = g = b = px[0];
                if (im.grey_key >= 0 && px[0] == im.grey_key) a = 0;
                break;
            case PixelMode::LA: r = g = b = px[0], a = px[1]; break;
            case PixelMode::P: {
                const uint8_t* e = &im.palette[size_t(px[0]) * 4];
                r = e[0], g = e[1], b = e[2];
                if (im.palette_transparency) a = e[3];
                break;
            }
        }
        // Images without alpha or transparency are only converted (no composite at all).
        const bool composite = im.mode == PixelMode::RGBA || im.mode == PixelMode::LA ||
                               (im.mode == PixelMode::P && im.palette_transparency) ||
                               (im.mode == PixelMode::L && im.grey_key >= 0);
        if (composite) {
            const uint8_t bg = chessboard(x, y);
            r = over(r, a, bg), g = over(g, a, bg), b = over(b, a, bg);
        }
        rgb[i * 3 + 0] = r, rgb[i * 3 + 1] = g, rgb[i * 3 + 2] = b;
    }
    return rgb;
}

}  // namespace

PreparedImage prepare_image(std::span<const uint8_t> bytes, const ImageLimits& limits, const ImageSettings& s) {
    const DecodedImage decoded = vision::decode_image(bytes, limits);
    PreparedImage out;
    ImageGeometry& g = out.geometry;
    g = image_geometry(decoded.width, decoded.height, s);
    const DecodedImage resized = vision::pillow_resize(decoded, g.resized_width, g.resized_height);
    const std::vector<uint8_t> rgb = to_rgb(resized);

    // (v/255 in double, to float32) - 0.5 in double, to float32, times 2 (exact): a 256-entry LUT.
    float lut[256];
    for (int v = 0; v < 256; ++v) lut[v] = float(double(float(double(v) / 255.0)) - 0.5) * 2.0f;
    const int p = s.patch_size;
    out.patches.assign(size_t(g.patches()) * 3 * size_t(p) * size_t(p), lut[0]);  // the zero padding
    for (int y = 0; y < g.resized_height; ++y)
        for (int x = 0; x < g.resized_width; ++x) {
            const int r = y / p, c = x / p, py = y % p, px = x % p;
            float* patch = &out.patches[(size_t(r) * size_t(g.grid_w) + size_t(c)) * 3 * size_t(p) * size_t(p)];
            for (int ch = 0; ch < 3; ++ch)
                patch[(size_t(ch) * size_t(p) + size_t(py)) * size_t(p) + size_t(px)] =
                    lut[rgb[(size_t(y) * size_t(g.resized_width) + size_t(x)) * 3 + size_t(ch)]];
        }

    // The content key: the RGB the tower sees and everything that shaped it.
    const int32_t key[] = {1, g.width, g.height, g.resized_width, g.resized_height, s.patch_size, s.merge,
                           s.in_patch_limit, s.patch_limit_on_one_side};
    out.content_hash = Fnv1a().add(key, sizeof key).add(rgb.data(), rgb.size()).value();
    return out;
}

}  // namespace k3
