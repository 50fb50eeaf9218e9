// Private to engine/kernels: the one matmul driver every SIMD set shares. It walks a matrix in
// passes of tokens (matmul_token_tile: a pass's activations stay in L2 while every weight row
// streams past them once) and, inside a pass, in tiles of rows x tokens; the ISA supplies only
// the tiles and their shape. Each (row, token) of a tile keeps its own accumulator, so the tile
// shape and the pass never change a result's bits: matmul gives matvec's bits for every token.
//
// An ISA file provides a tag type T with the tile shape,
//   kBf16Rows, kBf16Tokens            the bf16 tile of a pass of several tokens
//   kMxfp4RowsOneToken                MXFP4 rows per tile for a single token (decode)
//   kMxfp4Rows, kMxfp4Tokens          the MXFP4 tile of a pass of several tokens
// and, beside it, the functions the driver finds by T (argument-dependent lookup):
//   bf16_tile<R, TB>(T, W, cols, X, x_stride, Y, y_stride)
//       Y[t * y_stride + r] = row r of W . token t of X, for R rows and TB tokens
//   mxfp4_tile<R, TB>(T, P, Sc, cols, Xs, x_stride, Y, y_stride)
//       the same over MXFP4 rows, Xs holding split_even_odd tokens
//   split_even_odd(T, x, out, cols)   per 32-element group, the 16 even elements then the 16 odd
// Each ISA file declares T and its functions in an anonymous namespace, so every instantiation
// is that file's own, compiled with that file's ISA flags only.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/kernel_sets.h"
#include "util/check.h"

namespace k3::tiles {

// f.template operator()<N>() for the runtime count n in [1, kMax]: a tile's last, shorter part.
template <int kMax, class F>
inline void with_count(int64_t n, F&& f) {
    if constexpr (kMax >= 1) {
        if (n == kMax) {
            f.template operator()<kMax>();
            return;
        }
        with_count<kMax - 1>(n, f);
    }
}

// Rows [R rows at W] against tokens [t0, t1) of X into Y: full tiles of kBf16Tokens, then one
// shorter tile.
template <class T, int R>
void bf16_row_block(const uint16_t* W, const float* X, float* Y, int64_t rows, int64_t cols, int64_t t0,
                    int64_t t1) {
    int64_t t = t0;
    for (; t + T::kBf16Tokens <= t1; t += T::kBf16Tokens)
        bf16_tile<R, T::kBf16Tokens>(T{}, W, cols, X + t * cols, cols, Y + t * rows, rows);
    with_count<T::kBf16Tokens - 1>(t1 - t, [&]<int TB>() {
        bf16_tile<R, TB>(T{}, W, cols, X + t * cols, cols, Y + t * rows, rows);
    });
}

// One token (decode): one row per tile, a single sequential stream through the weights. Several
// tokens: passes of matmul_token_tile tokens, kBf16Rows x kBf16Tokens tiles.
template <class T>
void matmul_bf16(const uint16_t* W, const float* X, float* Y, int64_t rows, int64_t cols, int64_t n_tokens) {
    if (n_tokens == 1) {
        for (int64_t r = 0; r < rows; ++r) bf16_tile<1, 1>(T{}, W + r * cols, cols, X, cols, Y + r, rows);
        return;
    }
    const int64_t pass = matmul_token_tile(cols);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += pass) {
        const int64_t t1 = std::min(n_tokens, t0 + pass);
        int64_t r = 0;
        for (; r + T::kBf16Rows <= rows; r += T::kBf16Rows)
            bf16_row_block<T, T::kBf16Rows>(W + r * cols, X, Y + r, rows, cols, t0, t1);
        for (; r < rows; ++r) bf16_row_block<T, 1>(W + r * cols, X, Y + r, rows, cols, t0, t1);
    }
}

template <class T, int R>
void mxfp4_row_block(const uint8_t* P, const uint8_t* Sc, const float* Xs, float* Y, int64_t rows, int64_t cols,
                     int64_t n_tokens) {
    int64_t t = 0;
    for (; t + T::kMxfp4Tokens <= n_tokens; t += T::kMxfp4Tokens)
        mxfp4_tile<R, T::kMxfp4Tokens>(T{}, P, Sc, cols, Xs + t * cols, cols, Y + t * rows, rows);
    with_count<T::kMxfp4Tokens - 1>(n_tokens - t, [&]<int TB>() {
        mxfp4_tile<R, TB>(T{}, P, Sc, cols, Xs + t * cols, cols, Y + t * rows, rows);
    });
}

// The activations of a pass are split into even and odd halves per group first (a per-thread
// buffer, grown once, then reused); one token takes kMxfp4RowsOneToken rows a tile so several
// decode chains overlap, several tokens kMxfp4Rows x kMxfp4Tokens tiles.
template <class T>
void matmul_mxfp4(const uint8_t* packed, const uint8_t* scales, const float* X, float* Y, int64_t rows,
                  int64_t cols, int64_t n_tokens) {
    K3_CHECK(cols % 32 == 0, "MXFP4 width %lld is not a multiple of the 32-element group", (long long)cols);
    const int64_t pass = matmul_token_tile(cols);
    thread_local std::vector<float> split;
    if (static_cast<int64_t>(split.size()) < std::min(n_tokens, pass) * cols)
        split.resize(std::min(n_tokens, pass) * cols);
    const int64_t row_bytes = cols / 2, row_scales = cols / 32;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += pass) {
        const int64_t n = std::min(n_tokens - t0, pass);
        for (int64_t t = 0; t < n; ++t) split_even_odd(T{}, X + (t0 + t) * cols, split.data() + t * cols, cols);
        float* Yt = Y + t0 * rows;
        int64_t r = 0;
        if (n == 1)
            for (; r + T::kMxfp4RowsOneToken <= rows; r += T::kMxfp4RowsOneToken)
                mxfp4_tile<T::kMxfp4RowsOneToken, 1>(T{}, packed + r * row_bytes, scales + r * row_scales, cols,
                                                                 split.data(), cols, Yt + r, rows);
        for (; r + T::kMxfp4Rows <= rows; r += T::kMxfp4Rows)
            mxfp4_row_block<T, T::kMxfp4Rows>(packed + r * row_bytes, scales + r * row_scales, split.data(), Yt + r,
                                              rows, cols, n);
        for (; r < rows; ++r)
            mxfp4_row_block<T, 1>(packed + r * row_bytes, scales + r * row_scales, split.data(), Yt + r, rows, cols,
                                  n);
    }
}

template <class T>
void matvec_bf16(const uint16_t* W, const float* x, float* y, int64_t rows, int64_t cols) {
    matmul_bf16<T>(W, x, y, rows, cols, 1);
}

template <class T>
void matvec_mxfp4(const uint8_t* packed, const uint8_t* scales, const float* x, float* y, int64_t rows,
                  int64_t cols) {
    matmul_mxfp4<T>(packed, scales, x, y, rows, cols, 1);
}

}  // namespace k3::tiles
