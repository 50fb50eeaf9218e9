// A PNG file's bytes for tests that send images: 8-bit RGB or RGBA, the pixel data in stored
// (uncompressed) deflate blocks, so no compressor is needed and the file is exactly what the
// function of the pixels says. Decoders treat it as any other PNG.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>

namespace k3::test {

namespace png_detail {

inline uint32_t crc32(const std::string& s, size_t from) {
    uint32_t c = 0xffffffffu;
    for (size_t i = from; i < s.size(); ++i) {
        c ^= uint8_t(s[i]);
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

inline void be32(std::string& out, uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out += char((v >> s) & 0xff);
}

inline void chunk(std::string& out, const char* type, const std::string& data) {
    be32(out, uint32_t(data.size()));
    const size_t start = out.size();
    out += type;
    out += data;
    be32(out, crc32(out, start));
}

}  // namespace png_detail

// pixel(x, y) -> {r, g, b, a}; alpha is written only when `alpha`.
inline std::string png_file(int width, int height, const std::function<std::array<uint8_t, 4>(int, int)>& pixel,
                            bool alpha = false) {
    using namespace png_detail;
    const int channels = alpha ? 4 : 3;
    std::string raw;  // filter byte 0, then the row
    for (int y = 0; y < height; ++y) {
        raw += char(0);
        for (int x = 0; x < width; ++x) {
            const auto p = pixel(x, y);
            for (int c = 0; c < channels; ++c) raw += char(p[size_t(c)]);
        }
    }
    std::string z = {char(0x78), char(0x01)};  // zlib header, no compression
    for (size_t at = 0; at < raw.size() || at == 0; at += 65535) {
        const size_t n = std::min<size_t>(65535, raw.size() - at);
        z += char(at + n >= raw.size() ? 1 : 0);  // BFINAL, BTYPE 00 (stored)
        z += char(n & 0xff), z += char(n >> 8), z += char(~n & 0xff), z += char((~n >> 8) & 0xff);
        z.append(raw, at, n);
        if (raw.empty()) break;
    }
    uint32_t a = 1, b = 0;  // adler32
    for (char ch : raw) a = (a + uint8_t(ch)) % 65521, b = (b + a) % 65521;
    be32(z, b << 16 | a);

    std::string out = "\x89PNG\r\n\x1a\n";
    std::string ihdr;
    be32(ihdr, uint32_t(width));
    be32(ihdr, uint32_t(height));
    ihdr += char(8), ihdr += char(alpha ? 6 : 2), ihdr += char(0), ihdr += char(0), ihdr += char(0);
    chunk(out, "IHDR", ihdr);
    chunk(out, "IDAT", z);
    chunk(out, "IEND", "");
    return out;
}

}  // namespace k3::test
