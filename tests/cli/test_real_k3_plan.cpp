// The memory plan and its projection for the real Kimi K3 config (tests/fixtures/config): a plan
// at 8, 32, 128 and 256 GB (auto), each within its budget; at 8 GB the trunk is a byte ring that
// holds layer 0 (2.34 GB) alone but two of the 1.27 GB KDA layers, and the projection charges
// the reads it cannot overlap. And k3-slice (K3's layer sizes, 3 layers): a ring that keeps a
// layer from one token to the next, which the projection does not charge again.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "cli/projection.h"
#include "real_k3_config.h"
#include "io/file.h"
#include "store/memory_plan.h"
#include "synthetic/model_presets.h"
#include "weights/config.h"
#include "k3/error.h"

using namespace k3;
using namespace k3::io;
using k3::test::auto_plan;
using k3::test::real_k3;

namespace {

cli::Bandwidths this_disk() {
    cli::Bandwidths b;
    b.disk_gbps = 1.1;
    b.expert_gbps = 1.0;
    b.mem_gbps = 33;
    b.gflops = 40;
    return b;
}

}  // namespace

TEST_CASE("the real Kimi K3 has a plan at 8, 32, 128 and 256 GB, each within its budget") {
    const cli::ModelSizes m = real_k3();
    REQUIRE(m.layer_bytes.size() == 93);
    CHECK(m.layer_bytes[0] > 2 * m.layer_bytes[1] * 9 / 10);  // layer 0's dense MLP: 2.34 GB vs 1.27 GB
    double previous_s = 0;
    for (double gb : {8.0, 32.0, 128.0, 256.0}) {
        CAPTURE(gb);
        MemoryPlan p;
        REQUIRE_NOTHROW(p = auto_plan(m, gb));
        MESSAGE(p.describe());
        CHECK(p.trunk.total_bytes() <= p.trunk_budget);
        CHECK(p.need_bytes + p.prompt_cache_budget <= int64_t(gb * 1e9 * kRefuseAboveFraction));
        const cli::Projection proj = cli::project(m, p, this_disk(), p.chunk_tokens);
        CHECK(proj.seconds_per_token > 0);
        if (previous_s > 0) CHECK(proj.seconds_per_token <= previous_s);  // more memory is never slower
        previous_s = proj.seconds_per_token;
    }
}

TEST_CASE("at 8 GB the real K3's trunk is a byte ring: layer 0 alone, two KDA layers at a time") {
    const cli::ModelSizes m = real_k3();
    const MemoryPlan p = auto_plan(m, 8);
    const int64_t layer0 = int64_t(window_capacity(m.layer_bytes[0]));
    CHECK(p.trunk.ring_bytes >= layer0);
    CHECK(p.trunk.ring_bytes < 2 * layer0);  // two uniform slots (4.68 GB) would not fit
    CHECK(p.trunk.ring_bytes >= 2 * int64_t(window_capacity(m.layer_bytes[1])));
    CHECK(p.trunk.ring_max_ahead >= 1);
    CHECK(p.trunk.ring_waiting_layers >= 1);   // layer 1 cannot be read beside layer 0
    CHECK(p.trunk.ring_waiting_layers <= 3);
    CHECK(p.describe().find("ring 3.") != std::string::npos);

    // The projection charges the lost overlap, and the smallest ring (layer 0 alone) loses more.
    const cli::Projection proj = cli::project(m, p, this_disk(), p.chunk_tokens);
    CHECK(proj.waiting_layers == p.trunk.ring_waiting_layers);
    CHECK(proj.wait_seconds > 0);
    MemoryPlan one = p;
    one.trunk = plan_trunk(cli::footprint_of(m).layer_alloc_bytes, smallest_trunk_budget(cli::footprint_of(m).layer_alloc_bytes));
    CHECK(one.trunk.n_pinned == 0);
    const cli::Projection serial = cli::project(m, one, this_disk(), p.chunk_tokens);
    // (2.34 GB: two MLA layers, or a KDA and an MLA layer, still fit; two KDA layers do not)
    CHECK(serial.waiting_layers > 40);
    CHECK(serial.wait_seconds > proj.wait_seconds);
    CHECK(serial.seconds_per_token > proj.seconds_per_token);
    CHECK(serial.seconds_per_token < serial.trunk_seconds + serial.memory_seconds + serial.expert_seconds);
}

TEST_CASE("below about 7.2 GB auto says the real K3's read ring does not fit, and why") {
    const cli::ModelSizes m = real_k3();
    CHECK_NOTHROW(auto_plan(m, 7.5));
    CHECK_THROWS_WITH_AS(auto_plan(m, 6), doctest::Contains("its trunk's read ring needs 2.34 GB"), Error);
    CHECK_THROWS_WITH_AS(auto_plan(m, 6), doctest::Contains("--preset auto: MemAvailable is 6.00 GB"), Error);
}

TEST_CASE("k3-slice at a 3.2 GB trunk: the ring keeps the MLA layer, and the projection reads only the other two") {
    const ModelPreset* preset = find_preset("k3-slice");
    REQUIRE(preset);
    const cli::ModelSizes m = cli::sizes_of(preset->config, "k3-slice");
    REQUIRE(m.layer_bytes.size() == 3);
    MemoryOptions o;
    o.trunk_gb = 3.2;
    o.cache_gb = 0.3;
    const MemoryPlan p = make_memory_plan(cli::footprint_of(m), o, int64_t(64e9));
    REQUIRE(p.streaming);
    CHECK(p.trunk.n_pinned == 0);
    // Layer 0 (2.34 GB) and layer 2 (0.83 GB) fit side by side; layer 1 takes layer 0's bytes.
    CHECK(p.trunk.ring_kept_layers == 1);
    CHECK(p.trunk.ring_kept_bytes == int64_t(window_capacity(m.layer_bytes[2])));
    CHECK(p.describe().find("1 of 3 streamed layers stays in it, read once") != std::string::npos);
    const cli::Projection proj = cli::project(m, p, this_disk(), p.chunk_tokens);
    CHECK(proj.kept_layers == 1);
    CHECK(proj.trunk_disk_bytes == m.layer_bytes[0] + m.layer_bytes[1]);  // measured: 3.597 GB a token

    // At the smallest ring (layer 0 alone) every layer is read every token.
    o.trunk_gb = 2.35;
    const MemoryPlan one = make_memory_plan(cli::footprint_of(m), o, int64_t(64e9));
    CHECK(one.trunk.ring_kept_layers == 0);
    CHECK(cli::project(m, one, this_disk(), one.chunk_tokens).trunk_disk_bytes == m.trunk());
}
