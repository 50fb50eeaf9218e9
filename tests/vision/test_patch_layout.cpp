// The layout of the tower's patches (docs/model.md "Image input", "Preprocessing": "Patches"),
// from an image whose pixels spell their own coordinates: patch P = r gw + c is [3][14][14],
// channel first, element [ch][py][px] the pixel at x = 14c + px, y = 14r + py, the padding at the
// bottom and the right -1 exactly. A patch written transposed (py and px swapped), a grid walked
// column-major or channels interleaved land other pixels in those places, and fail here.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "common/png_file.h"
#include "k3/image.h"

using namespace k3;

namespace {

// The pixel at (x, y): red is x, green is y, blue 200 - x - y: every value says where it is from.
std::array<uint8_t, 4> coordinate_pixel(int x, int y) {
    return {uint8_t(x), uint8_t(y), uint8_t(200 - x - y), 255};
}

// A channel value normalised as the definition says: v/255 in double, to float32, minus 0.5 in
// double, to float32, times 2.
float normalised(int v) { return float(double(float(double(v) / 255.0)) - 0.5) * 2.0f; }

}  // namespace

TEST_CASE("patch layout: patch r gw + c, channel first, element [ch][py][px] at (14c + px, 14r + py)") {
    // 70 x 43 is neither square nor a multiple of 28, and is not resized: padded to 84 x 56, a
    // grid of 4 patch rows by 6 patch columns.
    const int W = 70, H = 43;
    const std::string png = test::png_file(W, H, coordinate_pixel);
    const PreparedImage img =
        prepare_image(std::span(reinterpret_cast<const uint8_t*>(png.data()), png.size()));
    const ImageGeometry& g = img.geometry;
    REQUIRE(g.resized_width == W);
    REQUIRE(g.resized_height == H);
    REQUIRE(g.padded_width == 84);
    REQUIRE(g.padded_height == 56);
    REQUIRE(g.grid_h == 4);
    REQUIRE(g.grid_w == 6);
    REQUIRE(img.patches.size() == size_t(4 * 6 * 3 * 14 * 14));

    CHECK(normalised(0) == -1.0f);
    CHECK(normalised(255) == 1.0f);
    int wrong = 0;
    for (int r = 0; r < g.grid_h; ++r)
        for (int c = 0; c < g.grid_w; ++c)
            for (int ch = 0; ch < 3; ++ch)
                for (int py = 0; py < 14; ++py)
                    for (int px = 0; px < 14; ++px) {
                        const int x = 14 * c + px, y = 14 * r + py;
                        const float want = (x < W && y < H) ? normalised(coordinate_pixel(x, y)[size_t(ch)]) : -1.0f;
                        const size_t at = ((size_t(r * g.grid_w + c) * 3 + size_t(ch)) * 14 + size_t(py)) * 14 +
                                          size_t(px);
                        if (img.patches[at] != want && ++wrong <= 5)
                            FAIL_CHECK("patch (" << r << ", " << c << ") channel " << ch << " [" << py << "][" << px
                                                 << "]: " << img.patches[at] << ", want " << want);
                    }
    CHECK(wrong == 0);
}
