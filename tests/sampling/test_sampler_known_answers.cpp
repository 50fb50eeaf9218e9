// Sampler known answers: the draws for a seed are pinned by a PCG32 and splitmix64 written here
// from their published definitions (checked against the published first outputs), following the
// seeding and 53-bit uniform of docs/model.md "Sampling and its seed"; and ties at the top-k cut go
// to the lower id. A change to the RNG, its seeding, the uniform's construction or the tie order
// fails here even when the sampled frequencies (test_sampler.cpp) still look right.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "k3/sampler.h"

using namespace k3;

namespace {

// PCG32 (XSH RR) as in the PCG paper's pcg32_srandom_r / pcg32_random_r.
struct ReferencePcg32 {
    uint64_t state = 0, inc = 0;
    ReferencePcg32(uint64_t initstate, uint64_t initseq) {
        inc = (initseq << 1u) | 1u;
        next();
        state += initstate;
        next();
    }
    uint32_t next() {
        const uint64_t old = state;
        state = old * 6364136223846793005ull + inc;
        const auto xorshifted = uint32_t(((old >> 18u) ^ old) >> 27u);
        const auto rot = uint32_t(old >> 59u);
        return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u));
    }
};

// splitmix64 (Steele, Lea, Flood): advances x and returns the mixed value.
uint64_t reference_splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// docs/model.md "Sampling and its seed", turn 0: init and sequence from two splitmix64 steps of the
// seed; U from two draws.
struct ReferenceUniforms {
    ReferencePcg32 pcg;
    explicit ReferenceUniforms(uint64_t seed) : pcg(init_of(seed), seq_of(seed)) {}
    static uint64_t init_of(uint64_t x) { return reference_splitmix64(x); }
    static uint64_t seq_of(uint64_t x) {
        reference_splitmix64(x);
        return reference_splitmix64(x);
    }
    double next() {
        const uint64_t hi = pcg.next(), lo = pcg.next();
        return double((hi << 21) ^ (lo & 0x1FFFFF)) * 0x1.0p-53;
    }
};

}  // namespace

TEST_CASE("the reference PCG32 and splitmix64 give their published first outputs") {
    // pcg32-demo: pcg32_srandom(42, 54), then six draws.
    ReferencePcg32 pcg(42, 54);
    const uint32_t expected[] = {0xa15c02b7, 0x7b47f409, 0xba1d3330, 0x83d2f293, 0xbfa4784b, 0xcbed606e};
    for (uint32_t e : expected) CHECK(pcg.next() == e);
    uint64_t x = 0;
    CHECK(reference_splitmix64(x) == 0xe220a8397b1dcdafull);
}

TEST_CASE("draws for a seed are pinned: with equal logits the id is floor(U * n)") {
    // All logits equal: every candidate has weight exp(0) = 1 exactly, nothing is cut, and the
    // first id whose running sum exceeds r = U * n is floor(U * n): each draw shows U's top bits.
    constexpr int n = 1 << 16;
    const std::vector<float> logits(n, 0.25f);
    for (uint64_t seed : {uint64_t(0), uint64_t(1), uint64_t(42), uint64_t(0xdeadbeefcafef00d)}) {
        CAPTURE(seed);
        Sampler sampler({.temperature = 0.7f, .seed = seed});
        ReferenceUniforms u(seed);
        for (int draw = 0; draw < 64; ++draw) {
            CAPTURE(draw);
            REQUIRE(sampler.sample(logits) == int32_t(std::floor(u.next() * n)));
        }
    }
}

TEST_CASE("ties at the top-k cut go to the lower id, and the kept ones are drawn in id order") {
    // Ids 1, 2, 3 tie for the maximum; top_k = 2 keeps 1 and 2 (never 3), each with weight 1, in
    // id order: the draw is kept[floor(U * 2)].
    const std::vector<float> logits = {0.0f, 4.0f, 4.0f, 4.0f, 1.0f, 3.5f};
    const uint64_t seed = 7;
    Sampler sampler({.temperature = 1.0f, .top_k = 2, .seed = seed});
    ReferenceUniforms u(seed);
    int seen[2] = {0, 0};
    for (int draw = 0; draw < 200; ++draw) {
        CAPTURE(draw);
        const int32_t want = u.next() < 0.5 ? 1 : 2;
        const int32_t got = sampler.sample(logits);
        REQUIRE(got == want);
        ++seen[got - 1];
    }
    CHECK(seen[0] > 0);
    CHECK(seen[1] > 0);

    SUBCASE("top_k = 1 is greedy with the lowest tied id") {
        Sampler one({.temperature = 1.0f, .top_k = 1, .seed = 3});
        for (int draw = 0; draw < 20; ++draw) CHECK(one.sample(logits) == 1);
    }
    SUBCASE("with top_k = 4 the tie-free fourth place is id 5, drawn after the three tied ones") {
        // Kept in order 1, 2, 3 (weight 1 each), then 5 (weight e^-0.5, in float like the
        // sampler's weights): r = U * total.
        const double w5 = double(std::exp(3.5f - 4.0f));
        Sampler four({.temperature = 1.0f, .top_k = 4, .seed = 11});
        ReferenceUniforms u4(11);
        for (int draw = 0; draw < 200; ++draw) {
            CAPTURE(draw);
            const double r = u4.next() * (3.0 + w5);
            const int32_t want = r < 1.0 ? 1 : r < 2.0 ? 2 : r < 3.0 ? 3 : 5;
            REQUIRE(four.sample(logits) == want);
        }
    }
}
