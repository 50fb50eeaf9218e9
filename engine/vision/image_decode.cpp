// PNG and JPEG decoding (image_decode.h). Both libraries report errors through a longjmp out of
// their callbacks; the jump lands in the one function that owns the decoder, before any C++
// object with a destructor is created past the setjmp, and the message becomes a k3::Error.
#include "vision/image_decode.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

#include <jpeglib.h>
#include <png.h>

#include "k3/error.h"

namespace k3::vision {

int channels_of(PixelMode m) {
    switch (m) {
        case PixelMode::One:
        case PixelMode::L:
        case PixelMode::P: return 1;
        case PixelMode::LA: return 2;
        case PixelMode::RGB: return 3;
        case PixelMode::RGBA: return 4;
    }
    return 0;
}

const char* mode_name(PixelMode m) {
    switch (m) {
        case PixelMode::One: return "1";
        case PixelMode::L: return "L";
        case PixelMode::LA: return "LA";
        case PixelMode::RGB: return "RGB";
        case PixelMode::RGBA: return "RGBA";
        case PixelMode::P: return "P";
    }
    return "?";
}

namespace {

[[noreturn]] void refuse(const std::string& what) { throw Error(ErrorKind::Usage, what); }

void check_size(int64_t w, int64_t h, const ImageLimits& limits, const char* format) {
    if (w < 1 || h < 1) refuse(std::string("the ") + format + " image has no pixels");
    if (w * h > limits.max_pixels)
        refuse(std::string("the ") + format + " image is " + std::to_string(w) + "x" + std::to_string(h) + " = " +
               std::to_string(w * h) + " pixels, more than the limit of " + std::to_string(limits.max_pixels));
}

// ---- PNG ----

struct PngSource {
    std::span<const uint8_t> bytes;
    size_t at = 0;
    char message[256] = {0};
};

void png_read_bytes(png_structp png, png_bytep out, png_size_t n) {
    auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
    if (src->bytes.size() - src->at < n) png_error(png, "the data ends before the image does (truncated PNG)");
    std::memcpy(out, src->bytes.data() + src->at, n);
    src->at += n;
}

void png_on_error(png_structp png, png_const_charp msg) {
    auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
    std::snprintf(src->message, sizeof src->message, "%s", msg);
    png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}

DecodedImage decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits) {
    DecodedImage img;
    PngSource src{bytes};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    if (!png) refuse("PNG decoder could not start");
    png_infop info = png_create_info_struct(png);
    std::vector<png_bytep> rows;
    std::string failure;
    if (setjmp(png_jmpbuf(png))) {
        failure = src.message;
    } else {
        png_set_read_fn(png, &src, png_read_bytes);
        png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
        png_read_info(png, info);
        const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
        const int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
        if (int64_t(w) * int64_t(h) > limits.max_pixels || w < 1 || h < 1) {
            failure = "size:" + std::to_string(w) + "x" + std::to_string(h);
        } else if ((type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA) && depth == 16) {
            failure = "unsupported: 16-bit greyscale PNG (Pillow opens it as mode I;16, which the release's "
                      "preprocessing does not define); convert it to 8 bits";
        } else {
            img.width = int(w), img.height = int(h);
            png_color_16p trans_color = nullptr;
            png_bytep trans_alpha = nullptr;
            int n_trans = 0;
            const bool has_trns = png_get_tRNS(png, info, &trans_alpha, &n_trans, &trans_color) != 0;
            if (depth == 16) png_set_strip_16(png);  // Pillow keeps the high byte of 16-bit colour
            if (depth < 8) png_set_packing(png);
            if (type == PNG_COLOR_TYPE_PALETTE) {
                img.mode = PixelMode::P;
                png_colorp pal = nullptr;
                int n_pal = 0;
                png_get_PLTE(png, info, &pal, &n_pal);
                img.palette.assign(256 * 4, 0);
                for (int i = 0; i < 256; ++i) img.palette[size_t(i) * 4 + 3] = 255;
                for (int i = 0; i < n_pal && i < 256; ++i) {
                    img.palette[size_t(i) * 4 + 0] = pal[i].red;
                    img.palette[size_t(i) * 4 + 1] = pal[i].green;
                    img.palette[size_t(i) * 4 + 2] = pal[i].blue;
                }
                if (has_trns && trans_alpha) {
                    img.palette_transparency = true;
                    for (int i = 0; i < n_trans && i < 256; ++i) img.palette[size_t(i) * 4 + 3] = trans_alpha[i];
                }
            } else if (type == PNG_COLOR_TYPE_GRAY) {
                if (depth == 1) {
                    img.mode = PixelMode::One;
                } else {
                    img.mode = PixelMode::L;
                    if (depth < 8) png_set_expand_gray_1_2_4_to_8(png);
                    if (has_trns && trans_color) img.grey_key = trans_color->gray * (255 / ((1 << depth) - 1));
                }
            } else if (type == PNG_COLOR_TYPE_GRAY_ALPHA) {
                img.mode = PixelMode::LA;
            } else if (type == PNG_COLOR_TYPE_RGB) {
                img.mode = PixelMode::RGB;  // a tRNS colour key on RGB is ignored (docs/model.md "Preprocessing")
            } else {
                img.mode = PixelMode::RGBA;
            }
            png_set_interlace_handling(png);
            png_read_update_info(png, info);
            const size_t row_bytes = png_get_rowbytes(png, info);
            const size_t want = size_t(img.width) * size_t(channels_of(img.mode));
            if (row_bytes != want) {
                failure = "unsupported PNG layout";
            } else {
                img.pixels.resize(want * size_t(img.height));
                rows.resize(size_t(img.height));
                for (int y = 0; y < img.height; ++y) rows[size_t(y)] = img.pixels.data() + size_t(y) * want;
                png_read_image(png, rows.data());
                png_read_end(png, nullptr);
            }
        }
    }
    png_destroy_read_struct(&png, &info, nullptr);
    if (failure.rfind("size:", 0) == 0) {
        const std::string dims = failure.substr(5);
        const auto x = dims.find('x');
        check_size(std::stoll(dims.substr(0, x)), std::stoll(dims.substr(x + 1)), limits, "PNG");
    }
    if (failure.rfind("unsupported", 0) == 0) refuse("the image is an " + failure);
    if (!failure.empty()) refuse("the image data is not a decodable PNG: " + failure);
    if (img.mode == PixelMode::One)
        for (uint8_t& v : img.pixels) v = v ? 255 : 0;
    return img;
}

// ---- JPEG ----

struct JpegError {
    jpeg_error_mgr mgr;
    std::jmp_buf jump;
    char message[JMSG_LENGTH_MAX] = {0};
};

void jpeg_on_error(j_common_ptr cinfo) {
    auto* err = reinterpret_cast<JpegError*>(cinfo->err);
    (*cinfo->err->format_message)(cinfo, err->message);
    std::longjmp(err->jump, 1);
}

void jpeg_on_message(j_common_ptr, int) {}

DecodedImage decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits) {
    DecodedImage img;
    jpeg_decompress_struct cinfo;
    JpegError err;
    cinfo.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = jpeg_on_error;
    err.mgr.emit_message = jpeg_on_message;
    std::string failure;
    int64_t dims[2] = {0, 0};  // an array: setjmp may not keep scalars in registers
    jpeg_create_decompress(&cinfo);
    if (setjmp(err.jump)) {
        failure = err.message;
    } else {
        jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
        jpeg_read_header(&cinfo, TRUE);
        dims[0] = cinfo.image_width, dims[1] = cinfo.image_height;
        if (dims[0] * dims[1] > limits.max_pixels || dims[0] < 1 || dims[1] < 1) {
            failure = "size";
        } else if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
            failure = "unsupported: CMYK JPEG (convert it to RGB)";
        } else {
            // libjpeg's defaults, as Pillow decodes: ISLOW DCT, fancy upsampling (docs/model.md "Preprocessing").
            const bool grey = cinfo.jpeg_color_space == JCS_GRAYSCALE;
            cinfo.out_color_space = grey ? JCS_GRAYSCALE : JCS_RGB;
            img.mode = grey ? PixelMode::L : PixelMode::RGB;
            jpeg_start_decompress(&cinfo);
            img.width = int(cinfo.output_width), img.height = int(cinfo.output_height);
            const size_t stride = size_t(img.width) * size_t(cinfo.output_components);
            img.pixels.resize(stride * size_t(img.height));
            while (cinfo.output_scanline < cinfo.output_height) {
                JSAMPROW row = img.pixels.data() + size_t(cinfo.output_scanline) * stride;
                jpeg_read_scanlines(&cinfo, &row, 1);
            }
            jpeg_finish_decompress(&cinfo);
        }
    }
    jpeg_destroy_decompress(&cinfo);
    if (failure == "size") check_size(dims[0], dims[1], limits, "JPEG");
    if (failure.rfind("unsupported", 0) == 0) refuse("the image is a " + failure);
    if (!failure.empty()) refuse("the image data is not a decodable JPEG: " + failure);
    return img;
}

}  // namespace

DecodedImage decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits) {
    if (int64_t(bytes.size()) > limits.max_bytes)
        refuse("the image is " + std::to_string(bytes.size()) + " bytes, more than the limit of " +
               std::to_string(limits.max_bytes));
    static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return decode_png(bytes, limits);
    if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) return decode_jpeg(bytes, limits);
    refuse("the image data is neither PNG nor JPEG (the formats k3serve decodes)");
}

}  // namespace k3::vision
