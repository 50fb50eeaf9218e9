// Shared helpers for the io tests: files filled with a known pattern (scratch directories come
// from common/scratch.h).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/scratch.h"

namespace k3::test {

// The byte at offset i of every pattern file: depends on the offset in a way that catches
// shifted, swapped or stale blocks.
inline uint8_t pattern_byte(int64_t i, uint32_t seed = 0) {
    uint64_t x = uint64_t(i) * 0x9E3779B97F4A7C15ull + seed;
    x ^= x >> 29;
    return uint8_t(x * 0xBF58476D1CE4E5B9ull >> 56);
}

inline void write_pattern_file(const std::filesystem::path& path, int64_t size, uint32_t seed = 0) {
    std::vector<char> bytes(static_cast<size_t>(size));
    for (int64_t i = 0; i < size; ++i) bytes[size_t(i)] = char(pattern_byte(i, seed));
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(size));
}

inline bool matches_pattern(const uint8_t* p, int64_t offset, int64_t n, uint32_t seed = 0) {
    for (int64_t i = 0; i < n; ++i)
        if (p[i] != pattern_byte(offset + i, seed)) return false;
    return true;
}

}  // namespace k3::test
