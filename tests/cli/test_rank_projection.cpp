// plan --ranks (cli/rank_projection.h) on the real Kimi K3 config: the exchange's bytes are those
// of the wire (engine/parallel/mpi_wire.h: per other rank the pass's latent inputs, per row its
// token out and its output back, 4 bytes a number), counted here by hand from K3's widths; one
// rank is exactly the one-machine projection; four 128 GB machines are faster than one, their
// ranks other than 0 hold no trunk, and a slow network makes the exchange the bound; with the
// same small cache each of N ranks reads a 1/N share of one machine's experts; the memory plan's
// refusal is each rank's, named; machines unlike (each rank's memory and disk) are each planned
// with their own, and the slowest bounds a token. (plan --ranks's output:
// tests/deploy/test_doctor.py, Plan.)
#include <doctest/doctest.h>

#include <string>

#include "cli/projection.h"
#include "cli/rank_projection.h"
#include "k3/error.h"
#include "real_k3_config.h"
#include "store/memory_plan.h"

using namespace k3;
using k3::test::auto_plan;
using k3::test::real_k3;

namespace {

cli::Bandwidths workstation() {
    cli::Bandwidths b;
    b.disk_gbps = 7;
    b.expert_gbps = 7;
    b.mem_gbps = 33;
    b.gflops = 40;
    return b;
}

MemoryOptions auto_preset() {
    MemoryOptions o;
    o.preset = "auto";
    return o;
}

}  // namespace

TEST_CASE("the exchange of a MoE layer is the wire's bytes") {
    const cli::ModelSizes m = real_k3();
    REQUIRE(m.config.routed_expert_hidden_size == 3584);
    REQUIRE(m.config.num_experts_per_token == 16);
    REQUIRE(m.config.num_experts == 896);
    const int64_t row = 3584 * 4;  // a latent input or an output, floats
    // 4 ranks own 224 experts each: of a token's 16 rows, 12 are the others'
    CHECK(cli::exchange_bytes(m.config, 4, 1) == 3 * row + 12 * (4 + row));
    CHECK(cli::exchange_bytes(m.config, 4, 100) == 3 * 100 * row + 1200 * (4 + row));
    CHECK(cli::exchange_bytes(m.config, 2, 1) == row + 8 * (4 + row));
    CHECK(cli::exchange_bytes(m.config, 1, 100) == 0);
}

TEST_CASE("one rank is the one-machine projection; four 128 GB machines are faster, the network adds its share") {
    const cli::ModelSizes m = real_k3();
    const cli::Bandwidths b = workstation();
    const io::MemoryPlan alone = auto_plan(m, 128);
    const cli::Projection one = cli::project(m, alone, b, alone.chunk_tokens);

    const cli::RanksProjection single = cli::project_ranks(m, cli::rank_plans(m, auto_preset(), int64_t(128e9), 1), b, {});
    CHECK(single.seconds_per_token == one.seconds_per_token);
    CHECK(single.pass_seconds == one.chunk_seconds);
    CHECK(single.exchange_bytes_per_layer == 0);

    const std::vector<io::MemoryPlan> plans = cli::rank_plans(m, auto_preset(), int64_t(128e9), 4);
    REQUIRE(plans.size() == 4);
    for (size_t r = 1; r < plans.size(); ++r) {
        CAPTURE(r);
        CHECK(plans[r].trunk_budget == 0);
        CHECK(plans[r].need_bytes <= int64_t(128e9));
        CHECK(plans[r].cache_slots > plans[0].cache_slots);  // no trunk: its memory goes to experts
    }
    const cli::Network ten{10, 50};
    const cli::RanksProjection four = cli::project_ranks(m, plans, b, ten);
    MESSAGE("4 ranks: " << four.seconds_per_token << " s/token, one machine " << one.seconds_per_token);
    CHECK(four.seconds_per_token < one.seconds_per_token);
    CHECK(four.projections[1].trunk_disk_bytes == 0);
    CHECK(four.projections[1].expert_disk_bytes < one.expert_disk_bytes / 4);  // a quarter of the experts, more cache
    // 92 MoE layers of 215,088 bytes at 1.25 GB/s, plus 50 us each
    CHECK(four.exchange_seconds_per_token == doctest::Approx(92 * (215088 / 1.25e9 + 50e-6)));

    // at 0.01 Gbit/s the exchange (19.8 MB a token, 15.8 s) is the bound
    const cli::RanksProjection slow = cli::project_ranks(m, plans, b, {0.01, 50});
    CHECK(slow.seconds_per_token > slow.exchange_seconds_per_token);
    CHECK(slow.seconds_per_token > one.seconds_per_token);
    CHECK(slow.pass_seconds > four.pass_seconds);
}

TEST_CASE("three ranks of 896 experts own 298, 299 and 299: the exchange counts each rank's rows") {
    const cli::ModelSizes m = real_k3();
    const int64_t row = 3584 * 4;
    // rank 1 and 2: 16 x 299/896 = 5.34 rows of a token, 5 each; 100 tokens: 534 each
    CHECK(cli::exchange_bytes(m.config, 3, 1) == 2 * row + 10 * (4 + row));
    CHECK(cli::exchange_bytes(m.config, 3, 100) == 2 * 100 * row + 2 * 534 * (4 + row));
}

TEST_CASE("N ranks divide the expert reads: with the same small cache each reads its share of one machine's") {
    const cli::ModelSizes m = real_k3();
    const cli::Bandwidths b = workstation();
    MemoryOptions o;
    o.trunk_gb = 120;  // all of it resident
    o.cache_gb = 1;    // 57 slots: almost every expert a token needs is read
    const io::MemoryPlan alone = io::make_memory_plan(cli::footprint_of(m), o, int64_t(256e9));
    const cli::Projection one = cli::project(m, alone, b, alone.chunk_tokens);
    REQUIRE(one.expert_hit < 0.01);
    for (int n : {2, 4, 8}) {
        CAPTURE(n);
        const cli::RanksProjection r = cli::project_ranks(m, cli::rank_plans(m, o, int64_t(256e9), n), b, {25, 50});
        int64_t sum = 0;
        for (int k = 0; k < n; ++k) {
            CHECK(r.projections[size_t(k)].expert_disk_bytes == doctest::Approx(double(one.expert_disk_bytes) / n).epsilon(0.01));
            sum += r.projections[size_t(k)].expert_disk_bytes;
        }
        CHECK(double(sum) == doctest::Approx(double(one.expert_disk_bytes)).epsilon(0.01));
        CHECK(r.projections[1].trunk_disk_bytes == 0);
        // rank 0's experts are the bound, less of them with more ranks; the trunk's sweep stays
        CHECK(r.seconds_per_token < one.seconds_per_token);
        CHECK(r.exchange_seconds_per_token > 0);
    }
}

TEST_CASE("the memory refusal applies to each rank and names it") {
    const cli::ModelSizes m = real_k3();
    try {
        cli::rank_plans(m, auto_preset(), int64_t(4e9), 4);
        FAIL("4 GB machines were given a plan for the real K3");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).rfind("rank 0: --preset auto: MemAvailable is", 0) == 0);
    }
    // 8 GB is enough for rank 0's read ring and a cache, and for the others' caches
    const std::vector<io::MemoryPlan> plans = cli::rank_plans(m, auto_preset(), int64_t(8e9), 4);
    for (const io::MemoryPlan& p : plans) CHECK(p.need_bytes <= int64_t(8e9));
}

TEST_CASE("machines unlike: each rank's memory and disk; the slowest rank bounds a token, a small one is refused by name") {
    const cli::ModelSizes m = real_k3();
    const cli::Bandwidths b = workstation();
    const cli::RanksProjection alike = cli::project_ranks(m, cli::rank_plans(m, auto_preset(), int64_t(128e9), 4), b, {});
    // the same figures given per rank: the same projection
    const std::vector<int64_t> same(4, int64_t(128e9));
    const cli::RanksProjection given =
        cli::project_ranks(m, cli::rank_plans(m, auto_preset(), same), std::vector<cli::Bandwidths>(4, b), {});
    CHECK(given.seconds_per_token == alike.seconds_per_token);
    CHECK(given.pass_seconds == alike.pass_seconds);

    // rank 0 on 256 GB (more cache for its share), the others on 64 GB (less)
    const std::vector<io::MemoryPlan> plans =
        cli::rank_plans(m, auto_preset(), {int64_t(256e9), int64_t(64e9), int64_t(64e9), int64_t(64e9)});
    CHECK(plans[0].cache_slots > alike.plans[0].cache_slots);
    CHECK(plans[1].cache_slots < alike.plans[1].cache_slots);
    for (const io::MemoryPlan& p : plans) CHECK(p.need_bytes <= p.mem_available);
    // rank 3's disk at 2 GB/s: its experts take longest and the token waits for them
    std::vector<cli::Bandwidths> machines(4, b);
    machines[3].disk_gbps = machines[3].expert_gbps = 2;
    const cli::RanksProjection slow_disk = cli::project_ranks(m, plans, machines, {});
    const cli::RanksProjection fast_disks = cli::project_ranks(m, plans, b, {});
    CHECK(slow_disk.projections[3].seconds_per_token > slow_disk.projections[1].seconds_per_token);
    CHECK(slow_disk.seconds_per_token > fast_disks.seconds_per_token);
    CHECK(slow_disk.seconds_per_token ==
          doctest::Approx(slow_disk.projections[0].seconds_per_token + slow_disk.projections[3].seconds_per_token +
                          slow_disk.exchange_seconds_per_token - slow_disk.projections[0].expert_part_seconds));

    // rank 2 on a 1 GB machine: its cache cannot hold a layer's experts at once
    try {
        cli::rank_plans(m, auto_preset(), {int64_t(128e9), int64_t(128e9), int64_t(1e9), int64_t(128e9)});
        FAIL("a 1 GB rank was given a plan");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).rfind("rank 2: ", 0) == 0);
    }
}
