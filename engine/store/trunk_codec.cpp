// The trunk codec (trunk_codec.h): encoder and decoder. The decoder's bulk, whole groups of 32
// words without an escape, is the kernel set's trunk_words (kernels/kernels.h: a byte shuffle per
// 16 words in the SIMD sets); the rest goes word by word here.
#include "store/trunk_codec.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>

namespace k3::io {

namespace {

constexpr int kEscape = 15;

uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    out.insert(out.end(), b, b + 4);
}

// The parts of an encoded (not raw-stored) block.
struct Parts {
    const uint8_t* table;
    const uint8_t* nibbles;
    const uint8_t* low;
    const uint8_t* esc;
    const uint8_t* esc_end;
    const uint8_t* tail;
    size_t words;
};

// Words [i, end) the plain way; advances *esc. False when the escapes run out.
bool decode_words_scalar(const Parts& p, size_t i, size_t end, const uint8_t** esc, uint8_t* dst) {
    for (; i < end; ++i) {
        const int idx = (p.nibbles[i >> 1] >> ((i & 1) * 4)) & 15;
        uint8_t hi;
        if (idx == kEscape) {
            if (*esc == p.esc_end) return false;
            hi = *(*esc)++;
        } else {
            hi = p.table[idx];
        }
        dst[2 * i] = p.low[i];
        dst[2 * i + 1] = hi;
    }
    return true;
}

// The kernels' groups, each group they stop at (it holds an escape) word by word, and the words
// after the last whole group.
bool decode_words(const Kernels& k, const Parts& p, uint8_t* dst, const uint8_t** esc) {
    size_t i = 0;
    while (true) {
        i = k.trunk_words(p.table, p.nibbles, p.low, i, p.words, dst);
        if (i + 32 > p.words) break;
        if (!decode_words_scalar(p, i, i + 32, esc, dst)) return false;
        i += 32;
    }
    return decode_words_scalar(p, i, p.words, esc, dst);
}

}  // namespace

size_t encode_block(const uint8_t* raw, size_t n, std::vector<uint8_t>& out) {
    const size_t start = out.size(), w = n / 2;
    std::array<uint64_t, 256> count{};
    for (size_t i = 0; i < w; ++i) count[raw[2 * i + 1]]++;
    // The 15 commonest high bytes (ties: the smaller value), each with its 4-bit code.
    std::array<int, 256> order;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return count[size_t(a)] > count[size_t(b)]; });
    std::array<uint8_t, 16> table{};
    std::array<uint8_t, 256> code;
    code.fill(kEscape);
    uint64_t escapes = w;
    for (int k = 0; k < kEscape && count[size_t(order[size_t(k)])] > 0; ++k) {
        table[size_t(k)] = uint8_t(order[size_t(k)]);
        code[size_t(order[size_t(k)])] = uint8_t(k);
        escapes -= count[size_t(order[size_t(k)])];
    }
    const size_t encoded = kCodecHeaderBytes + (w + 1) / 2 + w + escapes + (n & 1);
    put_u32(out, uint32_t(n));
    if (encoded >= kCodecHeaderBytes + n) {  // does not shrink: stored as is
        put_u32(out, kStoredRaw);
        out.insert(out.end(), 16, 0);
        out.insert(out.end(), raw, raw + n);
        return out.size() - start;
    }
    put_u32(out, uint32_t(escapes));
    out.insert(out.end(), table.begin(), table.end());
    const size_t nib_at = out.size();
    out.resize(nib_at + (w + 1) / 2, 0);
    for (size_t i = 0; i < w; ++i) out[nib_at + i / 2] |= uint8_t(code[raw[2 * i + 1]] << ((i & 1) * 4));
    for (size_t i = 0; i < w; ++i) out.push_back(raw[2 * i]);
    for (size_t i = 0; i < w; ++i)
        if (code[raw[2 * i + 1]] == kEscape) out.push_back(raw[2 * i + 1]);
    if (n & 1) out.push_back(raw[n - 1]);
    return out.size() - start;
}

bool decode_block(const uint8_t* enc, size_t enc_bytes, uint8_t* dst, size_t raw_bytes, const Kernels& k) {
    if (enc_bytes < kCodecHeaderBytes || load_u32(enc) != raw_bytes) return false;
    const uint32_t n_esc = load_u32(enc + 4);
    if (n_esc == kStoredRaw) {
        if (enc_bytes != kCodecHeaderBytes + raw_bytes) return false;
        std::memcpy(dst, enc + kCodecHeaderBytes, raw_bytes);
        return true;
    }
    const size_t w = raw_bytes / 2;
    if (enc_bytes != kCodecHeaderBytes + (w + 1) / 2 + w + n_esc + (raw_bytes & 1)) return false;
    Parts p;
    p.table = enc + 8;
    p.nibbles = enc + kCodecHeaderBytes;
    p.low = p.nibbles + (w + 1) / 2;
    p.esc = p.low + w;
    p.esc_end = p.esc + n_esc;
    p.tail = p.esc_end;
    p.words = w;
    const uint8_t* esc = p.esc;
    if (!decode_words(k, p, dst, &esc) || esc != p.esc_end) return false;
    if (raw_bytes & 1) dst[raw_bytes - 1] = *p.tail;
    return true;
}

double high_byte_entropy_bits(const uint8_t* raw, size_t n) {
    std::array<uint64_t, 256> count{};
    const size_t w = n / 2;
    for (size_t i = 0; i < w; ++i) count[raw[2 * i + 1]]++;
    double bits = 0;
    for (uint64_t c : count)
        if (c) {
            const double p = double(c) / double(w);
            bits -= p * std::log2(p);
        }
    return bits;
}

}  // namespace k3::io
