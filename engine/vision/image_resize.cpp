// Pillow's resampling, reproduced from its documented semantics (docs/model.md "Preprocessing": the
// coefficient rule, the fixed-point rounding, the pass order) and checked against Pillow itself
// on generated fixtures (tests/reference/test_vision.py). Compiled without FMA contraction
// (engine/CMakeLists.txt) so the double weights round exactly as Pillow's C does.
#include "vision/image_resize.h"

#include <cmath>
#include <vector>

namespace k3::vision {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

double bicubic(double x) {
    constexpr double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

// For each output index: the first source index, the tap count and ksize fixed-point weights.
struct Coefficients {
    int ksize = 0;
    std::vector<int> first, count;
    std::vector<int32_t> weights;  // [out][ksize]
};

Coefficients coefficients(int in_size, int out_size) {
    constexpr double kSupport = 2.0;
    Coefficients c;
    const double scale = double(in_size) / out_size;
    const double filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = kSupport * filterscale;
    c.ksize = int(std::ceil(support)) * 2 + 1;
    c.first.resize(size_t(out_size));
    c.count.resize(size_t(out_size));
    c.weights.assign(size_t(out_size) * size_t(c.ksize), 0);
    std::vector<double> k(size_t(c.ksize));
    for (int xx = 0; xx < out_size; ++xx) {
        const double center = (xx + 0.5) * scale;
        const double ss = 1.0 / filterscale;
        int xmin = int(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = int(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        double ww = 0.0;
        for (int x = 0; x < xmax; ++x) {
            const double w = bicubic((x + xmin - center + 0.5) * ss);
            k[size_t(x)] = w;
            ww += w;
        }
        for (int x = 0; x < xmax; ++x) {
            if (ww != 0.0) k[size_t(x)] /= ww;
            const double v = k[size_t(x)] * (1 << kPrecisionBits);
            c.weights[size_t(xx) * size_t(c.ksize) + size_t(x)] = k[size_t(x)] < 0 ? int32_t(-0.5 + v) : int32_t(0.5 + v);
        }
        c.first[size_t(xx)] = xmin;
        c.count[size_t(xx)] = xmax;
    }
    return c;
}

uint8_t clip8(int32_t acc) {
    if (acc >= (1 << kPrecisionBits << 8)) return 255;
    if (acc <= 0) return 0;
    return uint8_t(acc >> kPrecisionBits);
}

// Rows [y0, y0 + rows) of `in` resampled horizontally to `width`.
std::vector<uint8_t> horizontal(const std::vector<uint8_t>& in, int in_w, int bands, int y0, int rows, int width) {
    const Coefficients c = coefficients(in_w, width);
    std::vector<uint8_t> out(size_t(width) * size_t(rows) * size_t(bands));
    for (int y = 0; y < rows; ++y) {
        const uint8_t* src = &in[size_t(y0 + y) * size_t(in_w) * size_t(bands)];
        for (int xx = 0; xx < width; ++xx) {
            const int32_t* k = &c.weights[size_t(xx) * size_t(c.ksize)];
            for (int b = 0; b < bands; ++b) {
                int32_t acc = 1 << (kPrecisionBits - 1);
                for (int x = 0; x < c.count[size_t(xx)]; ++x)
                    acc += int32_t(src[size_t(x + c.first[size_t(xx)]) * size_t(bands) + size_t(b)]) * k[x];
                out[(size_t(y) * size_t(width) + size_t(xx)) * size_t(bands) + size_t(b)] = clip8(acc);
            }
        }
    }
    return out;
}

std::vector<uint8_t> vertical(const std::vector<uint8_t>& in, int width, int bands, const Coefficients& c, int y0,
                              int height) {
    std::vector<uint8_t> out(size_t(width) * size_t(height) * size_t(bands));
    const size_t stride = size_t(width) * size_t(bands);
    for (int yy = 0; yy < height; ++yy) {
        const int32_t* k = &c.weights[size_t(yy) * size_t(c.ksize)];
        const int first = c.first[size_t(yy)] - y0;
        for (size_t i = 0; i < stride; ++i) {
            int32_t acc = 1 << (kPrecisionBits - 1);
            for (int y = 0; y < c.count[size_t(yy)]; ++y) acc += int32_t(in[size_t(first + y) * stride + i]) * k[y];
            out[size_t(yy) * stride + i] = clip8(acc);
        }
    }
    return out;
}

std::vector<uint8_t> bicubic_resize(const std::vector<uint8_t>& in, int in_w, int in_h, int bands, int width,
                                    int height) {
    const bool need_h = width != in_w, need_v = height != in_h;
    const Coefficients cv = coefficients(in_h, height);
    // Only the source rows the vertical pass reads go through the horizontal pass.
    const int y_first = cv.first[0];
    const int y_last = cv.first[size_t(height) - 1] + cv.count[size_t(height) - 1];
    if (!need_h) return vertical(in, in_w, bands, cv, 0, height);
    if (!need_v) return horizontal(in, in_w, bands, 0, in_h, width);
    const std::vector<uint8_t> tmp = horizontal(in, in_w, bands, y_first, y_last - y_first, width);
    return vertical(tmp, width, bands, cv, y_first, height);
}

// Pillow's ImagingScaleAffine for NEAREST: the source coordinate advances by in/out per pixel
// from in/out * 0.5, truncated.
std::vector<int> nearest_index(int in_size, int out_size) {
    std::vector<int> idx(static_cast<size_t>(out_size), 0);
    const double a = double(in_size) / out_size;
    double xo = a * 0.5;
    for (int x = 0; x < out_size; ++x) {
        int v = xo < 0.0 ? -1 : int(xo);
        idx[size_t(x)] = v < 0 ? 0 : v >= in_size ? in_size - 1 : v;
        xo += a;
    }
    return idx;
}

// Pillow's RGBA -> RGBa and back (Convert.c): c * a / 255 rounded; c * 255 / a, clipped.
uint8_t muldiv255(int a, int b) {
    const int tmp = a * b + 128;
    return uint8_t(((tmp >> 8) + tmp) >> 8);
}

}  // namespace

DecodedImage pillow_resize(const DecodedImage& in, int width, int height) {
    if (width == in.width && height == in.height) return in;
    DecodedImage out = in;
    out.width = width, out.height = height;
    const int bands = channels_of(in.mode);
    if (in.mode == PixelMode::P || in.mode == PixelMode::One) {
        const std::vector<int> xs = nearest_index(in.width, width), ys = nearest_index(in.height, height);
        out.pixels.resize(size_t(width) * size_t(height));
        for (int y = 0; y < height; ++y)
            for (int x = 0; x < width; ++x)
                out.pixels[size_t(y) * size_t(width) + size_t(x)] =
                    in.pixels[size_t(ys[size_t(y)]) * size_t(in.width) + size_t(xs[size_t(x)])];
        return out;
    }
    const bool alpha = in.mode == PixelMode::RGBA || in.mode == PixelMode::LA;
    if (!alpha) {
        out.pixels = bicubic_resize(in.pixels, in.width, in.height, bands, width, height);
        return out;
    }
    std::vector<uint8_t> pre = in.pixels;
    for (size_t p = 0; p < pre.size(); p += size_t(bands)) {
        const int a = pre[p + size_t(bands) - 1];
        for (int b = 0; b + 1 < bands; ++b) pre[p + size_t(b)] = muldiv255(pre[p + size_t(b)], a);
    }
    out.pixels = bicubic_resize(pre, in.width, in.height, bands, width, height);
    for (size_t p = 0; p < out.pixels.size(); p += size_t(bands)) {
        const int a = out.pixels[p + size_t(bands) - 1];
        if (a == 255 || a == 0) continue;
        for (int b = 0; b + 1 < bands; ++b) {
            const int v = 255 * out.pixels[p + size_t(b)] / a;
            out.pixels[p + size_t(b)] = uint8_t(v > 255 ? 255 : v);
        }
    }
    return out;
}

}  // namespace k3::vision
