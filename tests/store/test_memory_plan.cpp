// Memory plans: presets, explicit budgets, auto, largest-first pinning with a byte ring (one that
// holds every two neighbouring streamed layers when the budget allows), and refusals that say what was asked, what is available and what to change.
#include <doctest/doctest.h>

#include "store/memory_plan.h"
#include "weights/chunk_size.h"
#include "k3/error.h"

using namespace k3;
using namespace k3::io;

namespace {

constexpr int64_t MB = 1000 * 1000;

// A k3-mini-like footprint: a big dense layer 0, then 23 MoE layers of two sizes.
ModelFootprint mini_like() {
    ModelFootprint f;
    f.layer_alloc_bytes.push_back(150 * MB);
    for (int il = 1; il < 24; ++il) f.layer_alloc_bytes.push_back((il % 4 == 3 ? 80 : 66) * MB);
    f.expert_slot_bytes = 1257472;  // window_capacity(1,253,376)
    f.routed_experts = 23 * 256;
    f.experts_per_token = 16;
    f.resident_bytes = 270 * MB;
    return f;
}

int64_t sum_alloc(const ModelFootprint& f) {
    int64_t s = 0;
    for (auto b : f.layer_alloc_bytes) s += b;
    return s;
}

MemoryOptions opts(std::string preset, double trunk = -1, double cache = -1) {
    MemoryOptions o;
    o.preset = std::move(preset);
    o.trunk_gb = trunk;
    o.cache_gb = cache;
    return o;
}

constexpr int64_t kPlenty = int64_t(200) * 1000 * MB;

}  // namespace

TEST_CASE("the preset table has the C engine's names and K3 budgets") {
    auto presets = memory_presets();
    REQUIRE(presets.size() == 5);
    CHECK(presets[0].name == "laptop");
    CHECK(presets[0].trunk_gb == 3.0);
    CHECK(presets[0].cache_gb == 1.0);
    CHECK(presets[1].name == "desktop");
    CHECK(presets[2].name == "workstation");
    CHECK(presets[2].trunk_gb == 60.0);
    CHECK(presets[3].name == "server");
    CHECK(presets[3].cache_gb == 13.0);
    CHECK(presets[4].name == "max");
    CHECK(presets[4].cache_gb == 109.0);
}

TEST_CASE("plan_trunk pins largest first and leaves the rest of the budget to a byte ring") {
    auto f = mini_like();
    SUBCASE("budget for everything: resident, no ring") {
        TrunkPlan p = plan_trunk(f.layer_alloc_bytes, sum_alloc(f));
        CHECK(p.n_pinned == 24);
        CHECK(p.ring_bytes == 0);
    }
    SUBCASE("300 MB: pinning the 150 MB layer 0 leaves a ring for any two neighbours (80 + 66 MB)") {
        TrunkPlan p = plan_trunk(f.layer_alloc_bytes, 300 * MB);
        CHECK(p.pinned[0]);
        CHECK(p.n_pinned == 1);
        CHECK(p.ring_bytes >= 146 * MB);
        CHECK(p.total_bytes() <= 300 * MB);
        CHECK(p.ring_waiting_layers == 0);
        CHECK(p.ring_max_ahead >= 1);
    }
    SUBCASE("200 MB: no pinned set leaves an overlapping ring, so it is all ring; layer 0 is read alone") {
        TrunkPlan p = plan_trunk(f.layer_alloc_bytes, 200 * MB);
        CHECK(p.n_pinned == 0);
        CHECK(p.ring_bytes > 195 * MB);
        CHECK(p.total_bytes() <= 200 * MB);
        CHECK(p.ring_waiting_layers >= 1);  // layer 1 (66 MB) does not fit beside layer 0 (150 MB)
        CHECK(p.ring_waiting_layers < 24);
        CHECK(p.ring_max_ahead >= 2);       // three 66 MB layers fit
        CHECK(p.describe_ring().find("streamed layers read only after the layer before it") != std::string::npos);
    }
    SUBCASE("1 GB: the largest layers are pinned, everything within budget") {
        TrunkPlan p = plan_trunk(f.layer_alloc_bytes, 1000 * MB);
        CHECK(p.total_bytes() <= 1000 * MB);
        CHECK(p.pinned[0]);
        for (int il : {3, 7, 11, 15, 19, 23}) CHECK(p.pinned[il]);  // the 80 MB layers
        CHECK(p.ring_waiting_layers == 0);
        // One more 66 MB layer would leave no ring for two 66 MB neighbours.
        CHECK(p.pinned_bytes + 66 * MB + 2 * 66 * MB > 1000 * MB);
    }
    SUBCASE("below the largest layer: a usage error with the minimum") {
        CHECK_THROWS_WITH_AS(plan_trunk(f.layer_alloc_bytes, 100 * MB), doctest::Contains("raise --trunk-gb to at least"),
                             Error);
        try {
            plan_trunk(f.layer_alloc_bytes, 100 * MB);
        } catch (const Error& e) {
            CHECK(e.kind() == ErrorKind::Usage);
        }
    }
}

TEST_CASE("smallest_trunk_budget is exactly the edge plan_trunk accepts: a ring of the largest layer") {
    auto f = mini_like();
    int64_t edge = smallest_trunk_budget(f.layer_alloc_bytes);
    CHECK(edge >= 150 * MB);
    CHECK(edge < 150 * MB + 4096);  // 150 MB rounded up to the ring's 4096-byte alignment
    TrunkPlan p = plan_trunk(f.layer_alloc_bytes, edge);
    CHECK(p.n_pinned == 0);
    CHECK(p.ring_bytes == edge);
    CHECK_THROWS_AS(plan_trunk(f.layer_alloc_bytes, edge - 1), Error);
    // Uniform layers and a ring of one: every read waits for the layer before it.
    std::vector<int64_t> uniform(6, 100 * 4096);
    TrunkPlan one = plan_trunk(uniform, smallest_trunk_budget(uniform));
    CHECK(one.ring_max_ahead == 0);
    CHECK(one.ring_waiting_layers == 6);
    CHECK(one.describe_ring().find("one layer at a time") != std::string::npos);
}

TEST_CASE("presets and explicit budgets, capped at what the model needs") {
    auto f = mini_like();
    MemoryPlan resident = make_memory_plan(f, MemoryOptions{}, kPlenty);
    CHECK_FALSE(resident.streaming);
    CHECK(resident.trunk.n_pinned == 24);
    CHECK(resident.cache_slots == 23 * 256);

    MemoryPlan laptop = make_memory_plan(f, opts("laptop"), kPlenty);
    CHECK(laptop.streaming);
    CHECK(laptop.trunk.n_pinned == 24);  // 3 GB covers this trunk
    CHECK(laptop.cache_slots == int(int64_t(1000) * MB / f.expert_slot_bytes));
    CHECK(laptop.describe().find("preset laptop") != std::string::npos);

    MemoryPlan max = make_memory_plan(f, opts("max"), kPlenty);
    CHECK(max.cache_slots == 23 * 256);  // capped at the pool

    // Explicit values override the preset; unset parts mean "everything".
    MemoryPlan mixed = make_memory_plan(f, opts("laptop", 0.3, -1), kPlenty);
    CHECK(mixed.trunk.ring_bytes > 0);
    CHECK(mixed.cache_slots == int(int64_t(1000) * MB / f.expert_slot_bytes));
    MemoryPlan cache_only = make_memory_plan(f, opts("", -1, 0.5), kPlenty);
    CHECK(cache_only.streaming);
    CHECK(cache_only.trunk.n_pinned == 24);
    CHECK(cache_only.cache_slots == int(int64_t(500) * MB / f.expert_slot_bytes));

    CHECK_THROWS_WITH_AS(make_memory_plan(f, opts("huge"), kPlenty), doctest::Contains("unknown memory preset 'huge'"), Error);
    CHECK_THROWS_WITH_AS(make_memory_plan(f, opts("", -1, 0.01), kPlenty), doctest::Contains("raise --cache-gb"), Error);
}

TEST_CASE("auto: trunk first, then cache, with a reserve, for any memory size") {
    auto f = mini_like();
    // Plenty: everything.
    MemoryPlan big = make_memory_plan(f, opts("auto"), int64_t(24) * 1000 * MB);
    CHECK(big.trunk.n_pinned == 24);
    CHECK(big.cache_slots == 23 * 256);
    CHECK(big.need_bytes < int64_t(24) * 1000 * MB * 95 / 100);
    // 6 GB available: the trunk (1.7 GB) still fits whole; the cache gets the rest minus reserve.
    MemoryPlan mid = make_memory_plan(f, opts("auto"), int64_t(6) * 1000 * MB);
    CHECK(mid.trunk.n_pinned == 24);
    CHECK(mid.cache_slots > 1000);
    CHECK(mid.cache_slots < 23 * 256);
    CHECK(mid.need_bytes <= int64_t(6) * 1000 * MB - int64_t(2) * 1000 * MB);  // the reserve is kept
    // 2.8 GB: the trunk is cut to a ring and some pins.
    MemoryPlan small = make_memory_plan(f, opts("auto"), int64_t(2800) * MB);
    CHECK(small.trunk.n_pinned < 24);
    CHECK(small.trunk.ring_bytes > 0);
    CHECK(small.trunk.total_bytes() <= small.trunk_budget);
    // Far more memory than the 2 GB + 2% reserve covers, and a model larger than it: still
    // within the 95% limit (the real K3 at 128/256 GB was refused by its own auto plan).
    auto huge = mini_like();
    for (auto& b : huge.layer_alloc_bytes) b *= 200;  // a 320 GB trunk
    for (int64_t avail_gb : {128, 256}) {
        const int64_t avail = avail_gb * 1000 * MB;
        MemoryPlan roomy = make_memory_plan(huge, opts("auto"), avail);
        CHECK(roomy.need_bytes + roomy.prompt_cache_budget <= avail * 95 / 100);
    }
    // Too little for anything: a usage error that says how much there is.
    CHECK_THROWS_WITH_AS(make_memory_plan(f, opts("auto"), int64_t(1500) * MB), doctest::Contains("MemAvailable is 1.50 GB"),
                         Error);
}

TEST_CASE("a plan above 95% of MemAvailable is refused before allocating, saying what to change") {
    auto f = mini_like();
    const int64_t avail = int64_t(8) * 1000 * MB;  // resident needs ~1.6 + 7.4 + 0.27 GB
    try {
        make_memory_plan(f, MemoryOptions{}, avail);
        FAIL("resident plan should be refused");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::Memory);
        std::string m = e.what();
        CHECK(m.find("needs 10.") != std::string::npos);              // what was asked (+1 GB prompt cache)
        CHECK(m.find("prompt cache 1.00 GB") != std::string::npos);
        CHECK(m.find("MemAvailable is 8.00 GB") != std::string::npos); // what is available
        CHECK(m.find("7.60 GB") != std::string::npos);                 // the 95% limit
        CHECK(m.find("--cache-gb") != std::string::npos);              // what to change
    }
    // Just under the limit passes (the prompt cache counts too).
    MemoryPlan ok = make_memory_plan(f, opts("", -1, 4.0), avail);
    CHECK(ok.need_bytes + ok.prompt_cache_budget <= avail * 95 / 100);
    MemoryOptions bigger = opts("", -1, 4.0);
    bigger.prompt_cache_gb = 2.0;
    CHECK_THROWS_AS(make_memory_plan(f, bigger, avail), Error);
}

TEST_CASE("the prefill pass is a line of the plan: its own budget and the expert cache's spare slots") {
    auto f = mini_like();
    // 200 kB a token; a tile of up to 256 tokens at 218.75 kB a token (56 MB), no expert rows
    f.pass.per_token = 200 * 1000;
    f.pass.tile_token_bytes = 218750;
    f.pass.tile_cap = 256;
    f.pass.expert_row_bytes = 0;
    f.pass.max_tokens = 100000;
    const int64_t slot = f.expert_slot_bytes;
    // The rule (docs/performance.md, "Prefill passes"): tokens = (own budget + lent slots x slot
    // - the tile) / per token, the cache lending what it holds beyond the pipeline's 2 x top-k + 8.
    auto tokens_for = [&](int64_t own, int cache_slots) {
        const int lendable = std::max(0, cache_slots - (2 * f.experts_per_token + 8));
        return int((own + lendable * slot - 56 * MB) / (200 * 1000));
    };
    // No budget asked for and a cache of top-k + 1 slots: nothing to lend, the default 256 MiB,
    // outside the plan's total.
    const double cache_min_gb = double((f.experts_per_token + 1) * slot) / 1e9;
    MemoryPlan plain = make_memory_plan(f, opts("", 0.3, cache_min_gb), kPlenty);
    REQUIRE(plain.cache_slots == f.experts_per_token + 1);
    CHECK(plain.chunk_tokens == tokens_for(kDefaultPassBytes, plain.cache_slots));
    CHECK(plain.pass_lent_slots == 0);
    CHECK(plain.need_bytes == plain.trunk.total_bytes() + int64_t(plain.cache_slots) * plain.cache_slot_bytes + plain.resident_bytes);
    CHECK(plain.describe().find("prefill pass " + std::to_string(plain.chunk_tokens) + " tokens") != std::string::npos);
    // A cache of 0.1 GB (79 slots) lends 39 of them: more tokens, still outside the total.
    MemoryPlan lending = make_memory_plan(f, opts("", 0.3, 0.1), kPlenty);
    REQUIRE(lending.cache_slots == 79);
    CHECK(lending.chunk_tokens == tokens_for(kDefaultPassBytes, 79));
    CHECK(lending.chunk_tokens > plain.chunk_tokens);
    CHECK(lending.pass_lent_slots == 39);
    CHECK(lending.describe().find("lent by the expert cache") != std::string::npos);
    CHECK(lending.need_bytes == lending.trunk.total_bytes() + int64_t(lending.cache_slots) * lending.cache_slot_bytes + lending.resident_bytes);
    // A preset's own budget (laptop: 512 MB) with its 1 GB cache's spare slots and its pinned
    // trunk (3 GB holds all of it) less the room of the layer in use (layer 0's 150 MB).
    MemoryPlan laptop = make_memory_plan(f, opts("laptop"), kPlenty);
    REQUIRE(laptop.trunk.n_pinned == 24);
    CHECK(laptop.chunk_tokens == tokens_for(512 * MB + sum_alloc(f) - 150 * MB, laptop.cache_slots));
    // An explicit --prefill-mb counts in the total (what it holds of it).
    MemoryOptions o = opts("", 0.3, cache_min_gb);
    o.prefill_mb = 100;
    MemoryPlan small = make_memory_plan(f, o, kPlenty);
    // (238 tokens: a pass shorter than a tile has a tile as short, 418.75 kB a token in all)
    CHECK(small.chunk_tokens == 238);
    CHECK(small.need_bytes == plain.need_bytes + small.prefill_bytes);
    // At most max_tokens.
    o.prefill_mb = 1e5;
    CHECK(make_memory_plan(f, o, kPlenty).chunk_tokens == f.pass.max_tokens);
    // A short pass has a short tile: one token takes 418.75 kB, two 837.5 kB.
    o.prefill_mb = 0.8375;
    CHECK(make_memory_plan(f, o, kPlenty).chunk_tokens == 2);
    o.prefill_mb = 0.4188;
    CHECK(make_memory_plan(f, o, kPlenty).chunk_tokens == 1);
    // A budget that holds not one token is refused, naming the option to raise.
    o.prefill_mb = 0.4;
    CHECK_THROWS_WITH_AS(make_memory_plan(f, o, kPlenty), doctest::Contains("raise --prefill-mb to at least 1"), Error);
    // A pass budget that does not fit is refused with the rest of the plan, naming it.
    o.prefill_mb = 3000;
    CHECK_THROWS_WITH_AS(make_memory_plan(f, o, int64_t(3000) * MB), doctest::Contains("prefill pass"), Error);
}

TEST_CASE("a pass borrows cheapest first: the cache's spare slots, the lm_head, then pinned layers less the room of the one in use") {
    auto f = mini_like();
    f.pass.per_token = 1 * MB;
    f.pass.tile_token_bytes = 0;
    f.pass.tile_cap = 1;
    f.pass.expert_row_bytes = 0;
    f.pass.max_tokens = 100000;
    f.lm_head_bytes = 40 * MB;
    const int64_t slot = f.expert_slot_bytes;
    const int pipeline = 2 * f.experts_per_token + 8;
    // The whole trunk pinned (24 layers, 1.76 GB), a cache of 100 slots: 60 to lend.
    MemoryOptions o = opts("", 10.0, double(100 * slot) / 1e9);
    o.prefill_mb = 10;  // 10 tokens of its own
    const MemoryPlan plan = make_memory_plan(f, o, kPlenty);
    REQUIRE(plan.trunk.n_pinned == 24);
    REQUIRE(plan.cache_slots == 100);
    const int64_t unpinned = sum_alloc(f) - 150 * MB;  // every layer, less the largest's room
    CHECK(plan.lendable_bytes() == (100 - pipeline) * slot + 40 * MB + unpinned);
    CHECK(plan.chunk_tokens == int((10 * MB + plan.lendable_bytes()) / MB));
    // A pass its own budget holds borrows nothing.
    CHECK(plan.loan_for(10 * MB).bytes == 0);
    // Just over it: slots, as few as cover it.
    PassLoan l = plan.loan_for(10 * MB + 3 * slot - 1);
    CHECK(l.cache_slots == 3);
    CHECK(!l.lm_head);
    CHECK(l.layers.empty());
    // Past the slots: the lm_head next.
    l = plan.loan_for(10 * MB + 60 * slot + 1);
    CHECK(l.cache_slots == 60);
    CHECK(l.lm_head);
    CHECK(l.layers.empty());
    CHECK(l.bytes == 60 * slot + 40 * MB);
    // A pass whose output rows do not fit one tile keeps the lm_head and unpins layers instead.
    l = plan.loan_for(10 * MB + 60 * slot + 1, /*lm_head_lendable=*/false);
    CHECK(!l.lm_head);
    REQUIRE(l.layers.size() == 2);
    // Past the lm_head: pinned layers, largest first; the first one keeps the room of the layer in
    // use, so it comes with a second (layer 0 150 MB, then the 80 MB ones: 3, 7, ...).
    l = plan.loan_for(10 * MB + 60 * slot + 40 * MB + 1);
    REQUIRE(l.layers.size() == 2);
    CHECK(l.layers[0] == 0);
    CHECK(l.layers[1] == 3);
    CHECK(l.bytes == 60 * slot + 40 * MB + 80 * MB);
    l = plan.loan_for(10 * MB + 60 * slot + 40 * MB + 81 * MB);
    CHECK(l.layers.size() == 3);
    // A pass that keeps the lm_head (decode steps between its layers) holds what the rest lends,
    // and that loan covers it: 40 tokens fewer here (the lm_head's 40 MB at 1 MB a token).
    CHECK(plan.chunk_tokens_keeping_lm_head == plan.chunk_tokens - 40);
    const int64_t keep_bytes = f.pass.bytes(plan.chunk_tokens_keeping_lm_head);
    CHECK(plan.loan_for(keep_bytes, /*lm_head_lendable=*/false).bytes >= keep_bytes - 10 * MB);
    CHECK(plan.loan_for(keep_bytes + 1 * MB, /*lm_head_lendable=*/false).bytes < keep_bytes + 1 * MB - 10 * MB);
    // A full pass borrows everything.
    l = plan.loan_for(plan.prefill_bytes);
    CHECK(l.layers.size() == 24);
    CHECK(l.bytes == plan.lendable_bytes());
    CHECK(plan.describe_pass().find("24 pinned trunk layers") != std::string::npos);
    CHECK(plan.describe_pass().find("the lm_head") != std::string::npos);
    // Everything resident (no budget): nothing is lent, the pass is its own budget.
    MemoryOptions r;
    r.prefill_mb = 10;
    const MemoryPlan resident = make_memory_plan(f, r, kPlenty);
    CHECK(resident.lendable_bytes() == 0);
    CHECK(resident.chunk_tokens == 10);
    CHECK(resident.chunk_tokens_keeping_lm_head == 10);
    CHECK(resident.loan_for(resident.prefill_bytes * 2).bytes == 0);
    // --pass-tokens caps it, and the plan line says so.
    o.pass_tokens = 25;
    const MemoryPlan capped = make_memory_plan(f, o, kPlenty);
    CHECK(capped.chunk_tokens == 25);
    CHECK(capped.chunk_tokens_keeping_lm_head == 25);
    CHECK(capped.describe_pass().find("at most 25 tokens (--pass-tokens)") != std::string::npos);
    CHECK(capped.loan_for(capped.prefill_bytes).cache_slots == capped.pass_lent_slots);
    // With lending too small for one token, the refusal names the option to change.
    auto tight = mini_like();
    tight.pass = f.pass;
    tight.pass.per_token = 10000 * MB;
    MemoryOptions t = opts("", 0.3, 0.1);
    CHECK_THROWS_WITH_AS(make_memory_plan(tight, t, kPlenty), doctest::Contains("raise --prefill-mb to at least"), Error);
}

TEST_CASE("MemAvailable is read from /proc/meminfo") {
    int64_t avail = read_mem_available();
    CHECK(avail > int64_t(64) << 20);
}
