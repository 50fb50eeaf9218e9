// Number formats shared by every kernel set: E8M0 scales and bf16 narrowing.
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"

namespace k3 {

float e8m0_to_float(uint8_t s) {
    if (s == 255) return 0.0f;  // E8M0 NaN: the whole group decodes to zero (spec, decisions 1)
    return std::ldexp(1.0f, static_cast<int>(s) - 127);
}

uint16_t f32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
    return static_cast<uint16_t>(u >> 16);
}

}  // namespace k3
