// The lossless trunk codec (store/trunk_codec.h): every byte sequence round-trips exactly, on
// near-Gaussian bf16 (the case it is for, where it must shrink to about 3/4), on random bytes
// (stored raw), on odd lengths and lengths that are not whole SIMD groups, and with escapes in
// and out of SIMD groups; a damaged block is refused, never decoded into wrong bytes silently
// when its size no longer adds up.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "store/trunk_codec.h"

using namespace k3::io;

namespace {

std::vector<uint8_t> gaussian_bf16(size_t words, float sigma, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<uint8_t> out(words * 2);
    for (size_t i = 0; i < words; ++i) {
        float v = dist(rng);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        const uint16_t h = uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
        std::memcpy(&out[2 * i], &h, 2);
    }
    return out;
}

std::vector<uint8_t> roundtrip(const std::vector<uint8_t>& raw, size_t* encoded_size = nullptr) {
    std::vector<uint8_t> enc;
    const size_t n = encode_block(raw.data(), raw.size(), enc);
    REQUIRE(n == enc.size());
    REQUIRE(n <= max_encoded_bytes(int64_t(raw.size())));
    if (encoded_size) *encoded_size = n;
    std::vector<uint8_t> back(raw.size(), 0xcd);
    REQUIRE(decode_block(enc.data(), enc.size(), back.data(), back.size()));
    return back;
}

}  // namespace

TEST_CASE("near-Gaussian bf16 round-trips and shrinks to about 3/4") {
    MESSAGE("kernels: " << k3::select_kernels().name);
    for (size_t words : {size_t(1), size_t(31), size_t(32), size_t(33), size_t(1000), size_t(1) << 20}) {
        CAPTURE(words);
        auto raw = gaussian_bf16(words, 0.02f, uint32_t(words));
        size_t enc = 0;
        CHECK(roundtrip(raw, &enc) == raw);
        if (words >= 1000) CHECK(double(enc) / double(raw.size()) < 0.78);
    }
    auto big = gaussian_bf16(size_t(1) << 20, 0.02f, 7);
    const double h = high_byte_entropy_bits(big.data(), big.size());
    CHECK(h > 2.5);   // sign + spread exponents: not trivially compressible
    CHECK(h < 4.0);   // but well under 4 bits, so a 4-bit code loses little
}

TEST_CASE("random bytes and odd lengths round-trip (stored raw when they do not shrink)") {
    std::mt19937 rng(1);
    for (size_t n : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(63), size_t(64), size_t(65), size_t(100001)}) {
        CAPTURE(n);
        std::vector<uint8_t> raw(n);
        for (auto& b : raw) b = uint8_t(rng());
        size_t enc = 0;
        CHECK(roundtrip(raw, &enc) == raw);
        CHECK(enc <= n + kCodecHeaderBytes);
    }
}

TEST_CASE("escapes inside and outside SIMD groups decode in order") {
    // 14 common high bytes plus a sprinkle of 40 rare ones: the rare ones are escapes.
    std::mt19937 rng(2);
    std::vector<uint8_t> raw(2 * 5000 + 1);
    for (size_t i = 0; i < 5000; ++i) {
        raw[2 * i] = uint8_t(rng());
        raw[2 * i + 1] = (i % 97 == 5 || i > 4990) ? uint8_t(100 + i % 40) : uint8_t(rng() % 14);
    }
    raw.back() = 0x7e;
    size_t enc = 0;
    CHECK(roundtrip(raw, &enc) == raw);
    CHECK(enc < raw.size());
}

TEST_CASE("a damaged or mismatched block is refused") {
    auto raw = gaussian_bf16(4096, 0.02f, 3);
    std::vector<uint8_t> enc;
    encode_block(raw.data(), raw.size(), enc);
    std::vector<uint8_t> out(raw.size());
    CHECK_FALSE(decode_block(enc.data(), enc.size() - 1, out.data(), out.size()));      // truncated
    CHECK_FALSE(decode_block(enc.data(), enc.size(), out.data(), out.size() - 2));      // wrong raw size
    auto bad = enc;
    bad[4] ^= 1;  // escape count no longer matches the size
    CHECK_FALSE(decode_block(bad.data(), bad.size(), out.data(), out.size()));
    CHECK_FALSE(decode_block(enc.data(), 3, out.data(), out.size()));
}

// The decoder's bulk is the kernel sets' trunk_words (kernels/kernels.h): every set this machine
// runs decodes every block to the same bytes, with escapes at the start, middle and end of SIMD
// groups and lengths that end inside a group.
TEST_CASE("every kernel set decodes the same bytes, escapes anywhere in a group") {
    std::mt19937 rng(5);
    for (size_t words : {size_t(95), size_t(96), size_t(200), size_t(4099)}) {
        std::vector<uint8_t> raw(2 * words + 1);
        for (size_t i = 0; i < words; ++i) {
            raw[2 * i] = uint8_t(rng());
            const bool rare = i % 32 == 0 || i % 32 == 17 || i % 32 == 31 ? rng() % 4 == 0 : rng() % 50 == 0;
            raw[2 * i + 1] = rare ? uint8_t(64 + rng() % 100) : uint8_t(rng() % 15);
        }
        std::vector<uint8_t> enc;
        encode_block(raw.data(), raw.size(), enc);
        REQUIRE(enc.size() < raw.size());  // encoded, not stored raw
        for (const k3::KernelSet& set : k3::kernel_sets()) {
            const k3::Kernels* k = set.usable();
            if (k == nullptr) continue;
            const std::string name = set.name;
            CAPTURE(words);
            CAPTURE(name);
            std::vector<uint8_t> back(raw.size(), 0xcd);
            REQUIRE(decode_block(enc.data(), enc.size(), back.data(), back.size(), *k));
            CHECK(back == raw);
        }
    }
}
