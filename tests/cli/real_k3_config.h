// The real Kimi K3 config (tests/fixtures/config/kimi_k3_config.json, found through
// K3_SOURCE_DIR) as the projection sees it, and its auto memory plan at a budget: for the
// plan and time-to-first-token tests.
#pragma once
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "cli/projection.h"
#include "store/memory_plan.h"
#include "weights/config.h"

namespace k3::test {

inline cli::ModelSizes real_k3() {
    const char* src = std::getenv("K3_SOURCE_DIR");
    REQUIRE(src);
    return cli::sizes_of(load_config(std::string(src) + "/tests/fixtures/config/kimi_k3_config.json"), "Kimi K3");
}

inline io::MemoryPlan auto_plan(const cli::ModelSizes& m, double gb) {
    MemoryOptions o;
    o.preset = "auto";
    return io::make_memory_plan(cli::footprint_of(m), o, int64_t(gb * 1e9));
}

}  // namespace k3::test
