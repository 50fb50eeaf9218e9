// The lossless trunk codec of `pack-trunk --compress` (performance.md, "Lossless trunk
// compression"). A bf16 weight is a low byte (the exponent's last bit and 7 mantissa bits:
// close to random) and a high byte (sign and the exponent's top 7 bits). In trained weights, and
// in make-model's near-Gaussian ones, the high byte takes few values: the 15 commonest cover all
// but a tiny fraction of a block. So a block of the run is stored as
//
//   u32 raw_bytes | u32 n_escapes | u8 table[16] | nibbles[ceil(w/2)] | low[w] | escapes[n_escapes] | tail[raw_bytes % 2]
//
// for its w = raw_bytes / 2 little-endian 16-bit words: word i's high byte is table[nibble i]
// (nibble i is the low half of byte i/2 for even i, the high half for odd i), or, for nibble 15,
// the next escape byte in order; its low byte is low[i]. 12 bits a weight plus escapes: 0.75 of
// bf16 on Gaussian weights (the entropy bound for the high byte is about 0.72; the fixed
// 4-bit code buys a branch-free decoder: one table shuffle per 16 weights in the SIMD kernel sets). A block that
// would not shrink (a run of f32 vectors, say) is stored as is: n_escapes = kStoredRaw, the raw
// bytes after the header. Any byte sequence round-trips exactly: the code never looks at what
// the bytes mean.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace k3::io {

inline constexpr int64_t kCodecBlockBytes = int64_t(2) << 20;   // raw bytes per block (last one shorter)
inline constexpr uint32_t kStoredRaw = 0xffffffffu;
inline constexpr size_t kCodecHeaderBytes = 24;

// Largest encoded size of a block of `raw_bytes` (the raw fallback plus the header).
inline size_t max_encoded_bytes(int64_t raw_bytes) { return kCodecHeaderBytes + size_t(raw_bytes); }

// Appends the encoding of raw[0, n) to out; returns the encoded size.
size_t encode_block(const uint8_t* raw, size_t n, std::vector<uint8_t>& out);

// Decodes one block of `encoded_bytes` into dst, which must hold exactly `raw_bytes`. Returns
// false (dst partly written) when the block is malformed or does not decode to raw_bytes bytes.
// Every kernel set decodes the same bytes; the stores take the best this CPU has (the engine's
// --kernels choice is about the arithmetic, which the codec has none of), tests every set.
bool decode_block(const uint8_t* encoded, size_t encoded_bytes, uint8_t* dst, size_t raw_bytes,
                  const Kernels& k = select_kernels());

// Shannon entropy of the high bytes of raw[0, n) taken as bf16 words, in bits per weight: the
// bound an entropy coder of the high byte alone could reach (reported by pack-trunk).
double high_byte_entropy_bits(const uint8_t* raw, size_t n);

}  // namespace k3::io
