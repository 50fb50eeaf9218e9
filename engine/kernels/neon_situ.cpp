// SiTU-GLU for the NEON set: situ_lanes.h's operations on 4 lanes (the scalar set's bits).
#include "kernels/neon_ops.h"
#include "kernels/situ_lanes.h"

namespace k3 {

void situ_glu_neon(float* g, const float* u, int64_t n, float b1, float b2) {
    situ::situ_glu_span<NeonOps, NeonOps::kWidth>(g, u, n, b1, b2);
}

}  // namespace k3
