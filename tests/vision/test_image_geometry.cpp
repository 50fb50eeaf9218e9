// The NaViT size rule (docs/model.md "Preprocessing") on a table of sizes worked out from the
// rule's arithmetic, not from the code, and the decoder's refusals of data that is no image.
#include <doctest/doctest.h>

#include <vector>

#include "k3/error.h"
#include "k3/image.h"

using namespace k3;

TEST_CASE("image geometry follows the size rule's table") {
    struct Row {
        int w, h, rw, rh, gh, gw;
        int64_t patches, rows;
    };
    const Row table[] = {
        {1, 1, 1, 1, 2, 2, 4, 1},
        {56, 56, 56, 56, 4, 4, 16, 4},
        {640, 480, 640, 480, 36, 46, 1656, 414},
        {1024, 1024, 1024, 1024, 74, 74, 5476, 1369},
        {1920, 1080, 1920, 1080, 78, 138, 10764, 2691},
        {3840, 2160, 3840, 2160, 156, 276, 43056, 10764},
        {4000, 3000, 4000, 3000, 216, 286, 61776, 15444},
        {8000, 6000, 4142, 3107, 222, 296, 65712, 16428},
        {1861, 7041, 1850, 7002, 502, 134, 67268, 16817},
        {100, 20000, 35, 7168, 512, 4, 2048, 512},
    };
    for (const Row& r : table) {
        CAPTURE(r.w);
        CAPTURE(r.h);
        const ImageGeometry g = image_geometry(r.w, r.h);
        CHECK(g.resized_width == r.rw);
        CHECK(g.resized_height == r.rh);
        CHECK(g.grid_h == r.gh);
        CHECK(g.grid_w == r.gw);
        CHECK(g.patches() == r.patches);
        CHECK(g.rows() == r.rows);
    }
}

TEST_CASE("data that is neither PNG nor JPEG, or is truncated, is refused by name") {
    const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
    CHECK_THROWS_WITH_AS(prepare_image(text), doctest::Contains("neither PNG nor JPEG"), Error);
    const std::vector<uint8_t> png_head = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
    CHECK_THROWS_WITH_AS(prepare_image(png_head), doctest::Contains("not a decodable PNG"), Error);
    const std::vector<uint8_t> jpeg_head = {0xff, 0xd8, 0xff, 0xe0, 0, 16};
    CHECK_THROWS_WITH_AS(prepare_image(jpeg_head), doctest::Contains("not a decodable JPEG"), Error);
    ImageLimits small;
    small.max_bytes = 3;
    CHECK_THROWS_WITH_AS(prepare_image(text, small), doctest::Contains("more than the limit"), Error);
}
