// The trunk codec (trunk_codec.h): encoder, scalar decoder, an SSSE3 decoder picked at run time
// on x86 (the build never assumes more than the baseline ISA) and a NEON decoder on aarch64
// (Advanced SIMD is its baseline ISA).
#include "store/trunk_codec.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define K3_CODEC_X86 1
#elif defined(__aarch64__)
#include <arm_neon.h>
#define K3_CODEC_NEON 1
#endif

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

[[maybe_unused]] bool decode_scalar(const Parts& p, uint8_t* dst, const uint8_t** esc) {
    return decode_words_scalar(p, 0, p.words, esc, dst);
}

#ifdef K3_CODEC_X86
// 32 words per step: 16 nibble bytes split into 32 table indices, one shuffle per 16 of them
// gives the high bytes, interleaved with the low bytes. A group holding an escape goes the
// scalar way (rare: escapes are the values outside a block's 15 commonest).
__attribute__((target("ssse3"))) bool decode_ssse3(const Parts& p, uint8_t* dst, const uint8_t** esc) {
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p.table));
    const __m128i low4 = _mm_set1_epi8(0x0f), escape = _mm_set1_epi8(kEscape);
    size_t i = 0;
    for (; i + 32 <= p.words; i += 32) {
        const __m128i nb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p.nibbles + i / 2));
        const __m128i lo_n = _mm_and_si128(nb, low4);
        const __m128i hi_n = _mm_and_si128(_mm_srli_epi16(nb, 4), low4);
        const __m128i idx0 = _mm_unpacklo_epi8(lo_n, hi_n);
        const __m128i idx1 = _mm_unpackhi_epi8(lo_n, hi_n);
        const int escapes = _mm_movemask_epi8(_mm_cmpeq_epi8(idx0, escape)) |
                            _mm_movemask_epi8(_mm_cmpeq_epi8(idx1, escape));
        if (escapes) {
            if (!decode_words_scalar(p, i, i + 32, esc, dst)) return false;
            continue;
        }
        const __m128i h0 = _mm_shuffle_epi8(table, idx0), h1 = _mm_shuffle_epi8(table, idx1);
        const __m128i l0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p.low + i));
        const __m128i l1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p.low + i + 16));
        auto* out = reinterpret_cast<__m128i*>(dst + 2 * i);
        _mm_storeu_si128(out + 0, _mm_unpacklo_epi8(l0, h0));
        _mm_storeu_si128(out + 1, _mm_unpackhi_epi8(l0, h0));
        _mm_storeu_si128(out + 2, _mm_unpacklo_epi8(l1, h1));
        _mm_storeu_si128(out + 3, _mm_unpackhi_epi8(l1, h1));
    }
    return decode_words_scalar(p, i, p.words, esc, dst);
}

bool have_ssse3() {
    static const bool yes = __builtin_cpu_supports("ssse3");
    return yes;
}
#endif

#ifdef K3_CODEC_NEON
// The SSSE3 decoder's steps in NEON: TBL is the 16-entry table shuffle, ZIP the interleaves.
bool decode_neon(const Parts& p, uint8_t* dst, const uint8_t** esc) {
    const uint8x16_t table = vld1q_u8(p.table);
    const uint8x16_t low4 = vdupq_n_u8(0x0f), escape = vdupq_n_u8(kEscape);
    size_t i = 0;
    for (; i + 32 <= p.words; i += 32) {
        const uint8x16_t nb = vld1q_u8(p.nibbles + i / 2);
        const uint8x16_t lo_n = vandq_u8(nb, low4), hi_n = vshrq_n_u8(nb, 4);
        const uint8x16_t idx0 = vzip1q_u8(lo_n, hi_n), idx1 = vzip2q_u8(lo_n, hi_n);
        const uint8x16_t is_escape = vorrq_u8(vceqq_u8(idx0, escape), vceqq_u8(idx1, escape));
        if (vmaxvq_u8(is_escape) != 0) {
            if (!decode_words_scalar(p, i, i + 32, esc, dst)) return false;
            continue;
        }
        const uint8x16_t h0 = vqtbl1q_u8(table, idx0), h1 = vqtbl1q_u8(table, idx1);
        const uint8x16_t l0 = vld1q_u8(p.low + i), l1 = vld1q_u8(p.low + i + 16);
        uint8_t* out = dst + 2 * i;
        vst1q_u8(out, vzip1q_u8(l0, h0));
        vst1q_u8(out + 16, vzip2q_u8(l0, h0));
        vst1q_u8(out + 32, vzip1q_u8(l1, h1));
        vst1q_u8(out + 48, vzip2q_u8(l1, h1));
    }
    return decode_words_scalar(p, i, p.words, esc, dst);
}
#endif

}  // namespace

const char* decoder_name() {
#ifdef K3_CODEC_X86
    if (have_ssse3()) return "ssse3";
#endif
#ifdef K3_CODEC_NEON
    return "neon";
#endif
    return "scalar";
}

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

bool decode_block(const uint8_t* enc, size_t enc_bytes, uint8_t* dst, size_t raw_bytes) {
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
    bool ok;
#ifdef K3_CODEC_X86
    ok = have_ssse3() ? decode_ssse3(p, dst, &esc) : decode_scalar(p, dst, &esc);
#elif defined(K3_CODEC_NEON)
    ok = decode_neon(p, dst, &esc);
#else
    ok = decode_scalar(p, dst, &esc);
#endif
    if (!ok || esc != p.esc_end) return false;
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
