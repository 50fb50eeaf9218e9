// FNV-1a (64-bit): the one hash for identities that need to be stable and cheap, not secret or
// collision-proof against an adversary: a checkpoint's fingerprint, a grammar's, the prompt
// cache's prefix keys (also written to its disk tier, so the values must never change), the
// synthetic writer's per-tensor seeds and the web UI's ETags.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace k3 {

class Fnv1a {
public:
    static constexpr uint64_t kOffsetBasis = 1469598103934665603ull;
    static constexpr uint64_t kPrime = 1099511628211ull;

    Fnv1a& add(const void* data, size_t n) {
        const auto* b = static_cast<const unsigned char*>(data);
        for (size_t i = 0; i < n; ++i) h_ = (h_ ^ b[i]) * kPrime;
        return *this;
    }
    Fnv1a& add(std::string_view s) { return add(s.data(), s.size()); }
    // A 32-bit value as its four bytes, least significant first (the same on every machine).
    Fnv1a& add_u32_le(uint32_t v) {
        for (int i = 0; i < 4; ++i, v >>= 8) h_ = (h_ ^ (v & 0xffu)) * kPrime;
        return *this;
    }
    uint64_t value() const { return h_; }

private:
    uint64_t h_ = kOffsetBasis;
};

inline uint64_t fnv1a(std::string_view s) { return Fnv1a().add(s).value(); }

}  // namespace k3
