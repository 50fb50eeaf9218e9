// How far the engine may land from the numpy reference's float64 goldens (tests/fixtures/golden),
// as rel-L2 = |engine - golden| / |golden|. Each bound is about 1.3x the worst the engine was
// measured at (the same with the scalar, AVX2 and AVX-512 kernel sets, which are bit-identical),
// so a change that moves the numbers at all, a reduction order among them, shows here; a change
// that should move them comes with a new measurement and new bounds. Measured with
//   build/tests/tests_model --test-case='golden*,trace: every*'   (it prints the worst figures)
#pragma once
#include <stdexcept>
#include <string>

namespace k3::test {

// Logits at every position: measured worst 1.252e-5 (tiny), 1.839e-6 (tiny-wide), 2 Dec 2026, with
// SiTU-GLU's polynomial tanh and exp (kernels.h situ_glu, situ_lanes.h; within 3.8e-7 of the
// exact function, where libm's tanhf and expf gave 9.47e-6 and 1.88e-6) and the online
// softmax's polynomial exp (kernel_sets.h, softmax_exp; libm's expf gave 1.575e-5 and 1.774e-6).
constexpr double kGoldenRelL2Tiny = 1.63e-5;
constexpr double kGoldenRelL2TinyWide = 2.45e-6;

inline double golden_rel_l2_bound(const std::string& preset) {
    if (preset == "tiny") return kGoldenRelL2Tiny;
    if (preset == "tiny-wide") return kGoldenRelL2TinyWide;
    throw std::invalid_argument("no measured golden tolerance for preset " + preset);
}

// Every named intermediate of the trace (embed .. result_norm) on tiny: measured worst 7.81e-6
// over the 67 steps of a 12-token prompt (2 Dec 2026, with the polynomial SiTU-GLU; 6.94e-6 with
// libm's tanhf, 7.99e-6 with libm's expf in the softmax too).
constexpr double kTraceRelL2Tiny = 1.02e-5;

}  // namespace k3::test
