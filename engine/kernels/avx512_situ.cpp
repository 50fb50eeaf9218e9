// SiTU-GLU for the AVX-512 set: situ_lanes.h's operations on 16 lanes (the scalar set's bits).
// GCC 12's AVX-512 headers build some intrinsics on _mm512_undefined_*(), which its
// uninitialised-use analysis reports after inlining (a known false positive, as in avx512.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/avx512_ops.h"
#include "kernels/situ_lanes.h"

namespace k3 {

void situ_glu_avx512(float* g, const float* u, int64_t n, float b1, float b2) {
    situ::situ_glu_span<Avx512Ops, Avx512Ops::kWidth>(g, u, n, b1, b2);
}

}  // namespace k3
