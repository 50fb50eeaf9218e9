// The blocked-attention contract (kernels.h), for every kernel set: attend_block over tiles of
// queries and blocks of keys gives each query exactly what attending alone gives it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernel_test_sets.h"
#include "kernels/kernels.h"

using namespace k3;
using namespace k3::test;

namespace {

// Causal queries at positions pos0.. (one a position) folded by `k` in tiles of `tile` queries,
// each tile over the key blocks its queries reach, normalised: what the blocked attention gives
// each query of the chunk.
struct Chunk {
    const std::vector<float>& Q;
    const std::vector<float>& keys;
    const std::vector<float>& vals;
    int64_t ks, vs, n_q, pos0;
    int dk, dv;
    float scale;
};

std::vector<float> attend_in_tiles(const Kernels& k, const Chunk& c, int tile, float* scratch) {
    std::vector<float> acc(size_t(c.n_q * c.dv), 0.0f), m(size_t(c.n_q), -INFINITY), l(size_t(c.n_q), 0.0f);
    for (int64_t q0 = 0; q0 < c.n_q; q0 += tile) {
        const int nq = int(std::min<int64_t>(tile, c.n_q - q0));
        std::vector<int32_t> n_keys(static_cast<size_t>(nq)), n_valid(static_cast<size_t>(nq));
        for (int i = 0; i < nq; ++i) n_keys[size_t(i)] = int32_t(c.pos0 + q0 + i + 1);
        for (int32_t b0 = 0; b0 < n_keys[size_t(nq - 1)]; b0 += kAttendBlock) {
            int i0 = 0;
            while (n_keys[size_t(i0)] <= b0) ++i0;
            for (int i = i0; i < nq; ++i) n_valid[size_t(i)] = std::min<int32_t>(kAttendBlock, n_keys[size_t(i)] - b0);
            k.attend_block(&c.Q[size_t((q0 + i0) * c.dk)], c.dk, nq - i0, &n_valid[size_t(i0)], &c.keys[size_t(b0 * c.ks)],
                           c.ks, &c.vals[size_t(b0 * c.vs)], c.vs, c.dk, c.dv, c.scale, &m[size_t(q0 + i0)],
                           &l[size_t(q0 + i0)], &acc[size_t((q0 + i0) * c.dv)], c.dv, scratch);
        }
    }
    for (int64_t i = 0; i < c.n_q; ++i)
        for (int j = 0; j < c.dv; ++j) acc[size_t(i * c.dv + j)] = acc[size_t(i * c.dv + j)] / l[size_t(i)];
    return acc;
}

}  // namespace

// A query's result depends only on its own keys, so
// the causal queries of a chunk folded in tiles of any size, each tile over the key blocks its
// queries reach, give every query exactly attend_head's bits for its own n_pos (what one-token
// decode computes). Checked for every set, with tiles that start mid-block and cross blocks.
TEST_CASE("blocked attention: tiles of any size give each query the bits of attending alone") {
    std::mt19937 rng(7);
    const int dk = 37, dv = 33;  // tails in both widths
    const int64_t ks = dk + 2, vs = dv + 3, n_q = 23, pos0 = 120;  // queries at positions 120..142
    const int64_t n_rows = pos0 + n_q;
    auto keys = random_floats(rng, size_t(n_rows * ks), 2.0f), vals = random_floats(rng, size_t(n_rows * vs));
    auto Q = random_floats(rng, size_t(n_q * dk), 2.0f);
    const float scale = 0.2f;
    const Chunk chunk{Q, keys, vals, ks, vs, n_q, pos0, dk, dv, scale};
    for (const NamedSet& set : all_sets()) {
        CAPTURE(set.name);
        const Kernels& k = *set.k;
        std::vector<float> alone(size_t(n_q * dv)), scratch(size_t(16 * kAttendBlock));
        for (int64_t i = 0; i < n_q; ++i)
            attend_head(k, &Q[size_t(i * dk)], keys.data(), ks, vals.data(), vs, pos0 + i + 1, dk, dv, scale,
                        &alone[size_t(i * dv)], scratch.data());
        if (&k != &scalar_kernels()) {  // and the scalar set's bits
            std::vector<float> ref(size_t(n_q * dv));
            for (int64_t i = 0; i < n_q; ++i)
                attend_head(scalar_kernels(), &Q[size_t(i * dk)], keys.data(), ks, vals.data(), vs, pos0 + i + 1, dk,
                            dv, scale, &ref[size_t(i * dv)], scratch.data());
            CHECK(same_bits(alone.data(), ref.data(), alone.size()));
        }
        for (int tile : {1, 2, 3, 4, 5, 8, 16}) {
            CAPTURE(tile);
            CHECK(same_bits(attend_in_tiles(k, chunk, tile, scratch.data()).data(), alone.data(), alone.size()));
        }
    }
}

// The AVX-512 set's tiles: scores 8 queries x 3 keys, then 4 x 4, then one query at a time;
// values 64 columns x 4 queries at a time, then 3, 2 or 1 queries, then the last dv % 64
// columns; folds of 16 queries. Tiles of up to mla.cpp's 64 queries (one query a position, so
// the queries of a group see different numbers of keys) with dk and dv tails and every remainder
// give each query exactly attending alone's bits, in every set.
TEST_CASE("blocked attention: wide tiles with every remainder give each query the bits of attending alone") {
    std::mt19937 rng(11);
    const int dk = 83, dv = 147;  // 5 x 16 + 3 key channels; 2 x 64 + 19 value columns
    const int64_t ks = dk + 5, vs = dv + 1, n_q = 70, pos0 = 100;  // queries at positions 100..169
    const int64_t n_rows = pos0 + n_q;
    auto keys = random_floats(rng, size_t(n_rows * ks), 1.5f), vals = random_floats(rng, size_t(n_rows * vs));
    auto Q = random_floats(rng, size_t(n_q * dk), 1.5f);
    const float scale = 0.15f;
    const Chunk chunk{Q, keys, vals, ks, vs, n_q, pos0, dk, dv, scale};
    std::vector<float> alone(size_t(n_q * dv)), scratch(size_t(64 * kAttendBlock));
    for (int64_t i = 0; i < n_q; ++i)
        attend_head(scalar_kernels(), &Q[size_t(i * dk)], keys.data(), ks, vals.data(), vs, pos0 + i + 1, dk, dv, scale,
                    &alone[size_t(i * dv)], scratch.data());
    for (const NamedSet& set : all_sets()) {
        CAPTURE(set.name);
        for (int tile : {6, 7, 13, 23, 64}) {
            CAPTURE(tile);
            CHECK(same_bits(attend_in_tiles(*set.k, chunk, tile, scratch.data()).data(), alone.data(), alone.size()));
        }
    }
}
