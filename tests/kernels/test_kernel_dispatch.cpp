// Which kernel set runs: K3_KERNELS / --kernels requests (exact names honoured, anything else
// falls back to the best set this CPU has), chosen once; and one case per SIMD set that is
// skipped, visibly, where the set is not built or the CPU lacks it.
#include <doctest/doctest.h>

#include "common/skip.h"

#include <string>

#include "kernels/kernel_sets.h"
#include "kernels/kernels.h"

using namespace k3;

TEST_CASE("K3_KERNELS requests: exact names honoured, others fall back") {
    CHECK(std::string(kernels_for_request("scalar").name) == "scalar");
    const Kernels& best = kernels_for_request(nullptr);
    CHECK(std::string(kernels_for_request("").name) == best.name);
    CHECK(std::string(kernels_for_request("bogus").name) == best.name);
    if (avx2_kernels() != nullptr) {
        CHECK(std::string(kernels_for_request("avx2").name) == "avx2");
    } else {
        CHECK(std::string(kernels_for_request("avx2").name) == "scalar");
    }
    if (avx512_kernels() != nullptr) {
        CHECK(std::string(kernels_for_request("avx512").name) == "avx512");
        CHECK(std::string(best.name) == "avx512");
    } else {
        CHECK(std::string(kernels_for_request("avx512").name) == (avx2_kernels() ? "avx2" : "scalar"));
    }
    if (neon_kernels() != nullptr) {
        CHECK(std::string(kernels_for_request("neon").name) == "neon");
        CHECK(std::string(best.name) == "neon");
    } else {
        CHECK(std::string(kernels_for_request("neon").name) == "scalar");
    }
    CHECK(&select_kernels() == &select_kernels());  // chosen once
}

// One case per SIMD set, skipped (reported to ctest as such) where the set is not built or the
// CPU lacks it, so a machine that silently tested only part of the kernels shows it.
TEST_CASE("the avx2 set is available on this machine (else the avx2 kernels are untested here)") {
    if (!avx2_kernels()) K3_SKIP("avx2 kernel set not built or not supported by this CPU: its tests did not run");
    CHECK(std::string(avx2_kernels()->name) == "avx2");
}
TEST_CASE("the avx512 set is available on this machine (else the avx512 kernels are untested here)") {
    if (!avx512_kernels()) K3_SKIP("avx512 kernel set not built or not supported by this CPU: its tests did not run");
    CHECK(std::string(avx512_kernels()->name) == "avx512");
}
// Only one of the x86 pair and neon can run on a machine; the cross-test (scripts/cross-test.sh)
// runs this suite on aarch64 under emulation, where this case is the one that must pass.
TEST_CASE("the neon set is available on this machine (else the neon kernels are untested here)") {
    if (!neon_kernels()) K3_SKIP("neon kernel set not built (not an aarch64 build): its tests did not run");
    CHECK(std::string(neon_kernels()->name) == "neon");
}
