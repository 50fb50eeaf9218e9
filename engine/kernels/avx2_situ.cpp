// SiTU-GLU for the AVX2 set: situ_lanes.h's operations on 8 lanes (the scalar set's bits).
#include "kernels/avx2_ops.h"
#include "kernels/situ_lanes.h"

namespace k3 {

void situ_glu_avx2(float* g, const float* u, int64_t n, float b1, float b2) {
    situ::situ_glu_span<Avx2Ops, Avx2Ops::kWidth>(g, u, n, b1, b2);
}

}  // namespace k3
