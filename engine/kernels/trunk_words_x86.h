// Private to the x86 sets (avx2.cpp, avx512.cpp; both compiled with at least AVX2, which
// includes SSSE3): the trunk codec's bulk decode (kernels.h, trunk_words), 32 words a step: 16
// nibble bytes split into 32 table indices, one 16-entry byte shuffle per 16 of them gives the
// high bytes, interleaved with the low bytes. In an anonymous namespace: each file that includes
// it has its own copy, compiled with its own flags.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace k3 {
namespace {

size_t trunk_words_x86(const uint8_t* table, const uint8_t* nibbles, const uint8_t* low, size_t begin, size_t words,
                       uint8_t* dst) {
    const __m128i tab = _mm_loadu_si128(reinterpret_cast<const __m128i*>(table));
    const __m128i low4 = _mm_set1_epi8(0x0f), escape = _mm_set1_epi8(15);
    size_t i = begin;
    for (; i + 32 <= words; i += 32) {
        const __m128i nb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(nibbles + i / 2));
        const __m128i lo_n = _mm_and_si128(nb, low4);
        const __m128i hi_n = _mm_and_si128(_mm_srli_epi16(nb, 4), low4);
        const __m128i idx0 = _mm_unpacklo_epi8(lo_n, hi_n);
        const __m128i idx1 = _mm_unpackhi_epi8(lo_n, hi_n);
        if (_mm_movemask_epi8(_mm_cmpeq_epi8(idx0, escape)) | _mm_movemask_epi8(_mm_cmpeq_epi8(idx1, escape))) break;
        const __m128i h0 = _mm_shuffle_epi8(tab, idx0), h1 = _mm_shuffle_epi8(tab, idx1);
        const __m128i l0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(low + i));
        const __m128i l1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(low + i + 16));
        auto* out = reinterpret_cast<__m128i*>(dst + 2 * i);
        _mm_storeu_si128(out + 0, _mm_unpacklo_epi8(l0, h0));
        _mm_storeu_si128(out + 1, _mm_unpackhi_epi8(l0, h0));
        _mm_storeu_si128(out + 2, _mm_unpacklo_epi8(l1, h1));
        _mm_storeu_si128(out + 3, _mm_unpackhi_epi8(l1, h1));
    }
    return i;
}

}  // namespace
}  // namespace k3
