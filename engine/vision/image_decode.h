// PNG (libpng) and JPEG (libjpeg-turbo) decoding into Pillow's modes, since the release's
// preprocessing resizes an image in the mode Pillow opened it in (docs/model.md "Preprocessing"):
// palette images stay indexed ("P"), 1-bit greyscale is "1", greyscale "L" (with an optional
// tRNS key), "LA", "RGB" and "RGBA". No colour management, no gamma, no EXIF rotation, which
// is what Pillow's defaults do.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "k3/image.h"

namespace k3::vision {

enum class PixelMode { One, L, LA, RGB, RGBA, P };

int channels_of(PixelMode m);  // bytes per pixel: 1, 1, 2, 3, 4, 1
const char* mode_name(PixelMode m);  // Pillow's name: "1", "L", "LA", "RGB", "RGBA", "P"

struct DecodedImage {
    int width = 0, height = 0;
    PixelMode mode = PixelMode::RGB;
    std::vector<uint8_t> pixels;          // [height][width][channels_of(mode)]
    std::vector<uint8_t> palette;         // P: [256][4] RGBA (alpha from tRNS, else 255)
    bool palette_transparency = false;    // P: the file had a tRNS chunk
    int grey_key = -1;                    // L: the tRNS grey value (transparent), or -1
};

// Recognises the format by its signature; throws k3::Error(Usage) for anything else, for
// corrupt or truncated data (libpng's / libjpeg's message), unsupported variants, or more than
// limits.max_pixels pixels (checked from the header, before any pixel is decoded).
DecodedImage decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits);

}  // namespace k3::vision
