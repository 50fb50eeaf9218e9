#include "wire/base64.h"

#include <cstdint>

namespace k3::server {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

}  // namespace

std::string base64_encode(std::string_view in) {
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const uint32_t v = uint32_t((unsigned char)in[i]) << 16 | uint32_t((unsigned char)in[i + 1]) << 8 |
                           (unsigned char)in[i + 2];
        for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
    }
    if (i < in.size()) {
        uint32_t v = uint32_t((unsigned char)in[i]) << 16;
        if (i + 1 < in.size()) v |= uint32_t((unsigned char)in[i + 1]) << 8;
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

std::optional<std::string> base64_decode(std::string_view in) {
    std::string out;
    out.reserve(in.size() / 4 * 3);
    uint32_t v = 0;
    int bits = 0, sextets = 0;
    bool padding = false;
    for (char ch : in) {
        if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') continue;
        if (ch == '=') {
            padding = true;
            continue;
        }
        const int s = sextet(ch);
        if (s < 0 || padding) return std::nullopt;
        v = v << 6 | uint32_t(s);
        bits += 6;
        ++sextets;
        if (bits >= 8) {
            bits -= 8;
            out += char((v >> bits) & 0xff);
        }
    }
    if (sextets % 4 == 1) return std::nullopt;  // 6 bits cannot end a byte
    return out;
}

}  // namespace k3::server
