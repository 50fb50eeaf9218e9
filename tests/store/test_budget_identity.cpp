// The memory dial changes nothing but speed: logits are bit-identical from everything resident
// down to the smallest budget that fits the read ring (one layer at a time), through rings that
// hold layers of different sizes (fewer than two of the largest), with and without a packed trunk (plain or
// compressed), with and without the next-layer lookahead, at any prefill pass and thread count,
// on the tiny fixtures; and a read that fails mid-run (a shard or trunk.bin truncated after start-up)
// fails the step with an IoError naming the file, never a wrong token.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <set>

#include "weights/checkpoint.h"
#include "io/file.h"
#include "store/memory_plan.h"
#include "store/trunk_pack.h"
#include "common/engine_outputs.h"
#include "common/model_cache.h"
#include "common/process.h"
#include "common/scratch.h"
#include "k3/engine.h"
#include "k3/error.h"

using namespace k3;

namespace {

// Scratch paths private to this test process (pack-trunk and make-model create them).
std::filesystem::path tmp_root() { return k3::test::process_scratch_root(); }

int sh(const std::string& cmd) { return k3::test::run_command(cmd).exit_code; }

std::string bin() { return k3::test::k3serve_bin(); }

// The shared synthetic checkpoint of a preset (tests that damage one copy it first).
std::filesystem::path fixture_model(const std::string& preset) { return k3::test::cached_model(preset); }

double gb(int64_t bytes) { return double(bytes) / io::kGB; }

using k3::test::argmax;
using k3::test::bit_identical;
using Outputs = k3::test::EngineOutputs;

std::vector<int32_t> prompt_for(int vocab) { return k3::test::spread_prompt(vocab, 7); }

Outputs run_model(const std::filesystem::path& model, const MemoryOptions& memory, std::string* plan = nullptr,
                  int threads = 0) {
    EngineOptions o;
    o.model_dir = model.string();
    o.memory = memory;
    o.threads = threads;
    auto engine = Engine::load(o);
    if (plan) *plan = engine->info().memory_plan;
    return k3::test::record_outputs(*engine, prompt_for(engine->info().n_vocab), 4);
}

struct Budgets {
    int64_t trunk_all, trunk_edge, cache_min, pool;
    int64_t cache_two_batches;  // the prefill pipeline's two batches (2 x top-k + 8 slots): nothing to lend
    PassCost pass;  // what a prefill pass takes (weights/chunk_size.h)
    int64_t largest_layer, smallest_layer;
};

Budgets budgets_of(const std::filesystem::path& model) {
    Checkpoint ckpt = open_checkpoint(model);
    io::ModelFootprint f = io::footprint_of(ckpt);
    Budgets b;
    b.trunk_all = std::accumulate(f.layer_alloc_bytes.begin(), f.layer_alloc_bytes.end(), int64_t(0));
    b.trunk_edge = io::smallest_trunk_budget(f.layer_alloc_bytes);
    b.cache_min = int64_t(f.experts_per_token + 1) * f.expert_slot_bytes;
    b.cache_two_batches = int64_t(2 * f.experts_per_token + 8) * f.expert_slot_bytes;
    b.pool = f.routed_experts * f.expert_slot_bytes;
    b.pass = f.pass;
    b.largest_layer = *std::max_element(f.layer_alloc_bytes.begin(), f.layer_alloc_bytes.end());
    b.smallest_layer = *std::min_element(f.layer_alloc_bytes.begin(), f.layer_alloc_bytes.end());
    return b;
}

MemoryOptions budget(double trunk_gb, double cache_gb, std::string trunk_dir = "", bool lookahead = true,
                     double prefill_mb = -1, int pass_tokens = 0) {
    MemoryOptions m;
    m.pass_tokens = pass_tokens;
    m.trunk_gb = trunk_gb;
    m.cache_gb = cache_gb;
    m.trunk_dir = std::move(trunk_dir);
    m.lookahead = lookahead;
    m.prefill_mb = prefill_mb;
    return m;
}

MemoryOptions resident_with_chunk(double prefill_mb) {
    MemoryOptions m;
    m.prefill_mb = prefill_mb;
    return m;
}

}  // namespace

TEST_CASE("logits are bit-identical at every budget, resident to the smallest ring") {
    for (std::string preset : {"tiny", "tiny-wide"}) {
        CAPTURE(preset);
        auto model = fixture_model(preset);
        Budgets b = budgets_of(model);
        REQUIRE(b.trunk_edge < b.trunk_all);  // the fixture really streams at the small budgets
        auto pack = tmp_root() / ("io-identity-pack-" + preset);
        std::filesystem::remove_all(pack);
        REQUIRE(sh(bin() + " pack-trunk " + model.string() + " " + pack.string() + " --quiet") == 0);
        auto zpack = tmp_root() / ("io-identity-zpack-" + preset);
        std::filesystem::remove_all(zpack);
        REQUIRE(sh(bin() + " pack-trunk " + model.string() + " " + zpack.string() + " --compress --quiet") == 0);

        Outputs resident = run_model(model, MemoryOptions{});
        const double half_trunk = gb((b.trunk_edge + b.trunk_all) / 2), half_cache = gb(std::max(b.pool / 2, b.cache_min));
        struct Case {
            const char* name;
            MemoryOptions memory;
            int threads = 0;
        };
        const Case cases[] = {
            {"streaming store, everything fits", budget(gb(b.trunk_all), gb(b.pool))},
            {"half-way", budget(gb((b.trunk_edge + b.trunk_all) / 2), gb(std::max(b.pool / 2, b.cache_min)))},
            {"smallest ring, smallest cache", budget(gb(b.trunk_edge + 4096), gb(b.cache_min + 4096))},
            {"smallest, packed trunk", budget(gb(b.trunk_edge + 4096), gb(b.cache_min + 4096), pack.string())},
            {"smallest, compressed trunk", budget(gb(b.trunk_edge + 4096), gb(b.cache_min + 4096), zpack.string())},
            {"everything fits, compressed trunk", budget(gb(b.trunk_all), gb(b.pool), zpack.string())},
            {"half-way, compressed trunk", budget(half_trunk, half_cache, zpack.string())},
            {"half-way, no lookahead", budget(half_trunk, half_cache, "", /*lookahead=*/false)},
            {"trunk resident, cache half, lookahead", budget(gb(b.trunk_all), half_cache)},
            {"prefill one token at a time", resident_with_chunk((double(b.pass.bytes(1)) + 0.5) / 1e6)},
            {"prefill three tokens at a time, smallest budget", budget(gb(b.trunk_edge + 4096), gb(b.cache_min + 4096), "", true, -1, 3)},
            {"half-way, the prompt in one pass", budget(half_trunk, half_cache, "", true, 1e3)},
            {"everything fits, a two-token own budget: the pass held by the cache's lent slots", budget(gb(b.trunk_all), gb(b.pool), "", true, (double(b.pass.bytes(2)) + 0.5) / 1e6)},
            {"trunk pinned, the pipeline's cache, a one-token own budget: the pass sized by the lm_head and unpinned layers",
             budget(gb(b.trunk_all), gb(b.cache_two_batches + 4096), "", true, (double(b.pass.bytes(1)) + 0.5) / 1e6)},
            {"smallest ring and cache, a one-token own budget: the pass sized by the lm_head",
             budget(gb(b.trunk_edge + 4096), gb(b.cache_min + 4096), "", true, (double(b.pass.bytes(1)) + 0.5) / 1e6)},
            {"half-way, one thread", budget(half_trunk, half_cache), 1},
            {"smallest, compressed, three threads", budget(gb(b.trunk_edge + 4096), gb(b.cache_min + 4096), zpack.string()), 3},
            // A byte ring that holds the largest layer and a small one, fewer than two of the
            // largest: layers of different sizes share it, read ahead where they fit.
            {"ring of the largest and the smallest layer", budget(gb(b.largest_layer + b.smallest_layer + 4096), gb(b.cache_min + 4096))},
            {"ring of the largest and the smallest layer, compressed trunk",
             budget(gb(b.largest_layer + b.smallest_layer + 4096), gb(b.cache_min + 4096), zpack.string())},
        };
        for (const auto& c : cases) {
            CAPTURE(std::string(c.name));
            std::string plan;
            Outputs got = run_model(model, c.memory, &plan, c.threads);
            MESSAGE(preset << ": " << plan);
            if (std::string(c.name).find("three tokens") != std::string::npos)
                CHECK(plan.find("prefill pass 3 tokens") != std::string::npos);
            if (std::string(c.name).find("one token at a time") != std::string::npos)
                CHECK(plan.find("prefill pass 1 tokens") != std::string::npos);
            if (std::string(c.name).find("largest and the smallest") != std::string::npos) {
                REQUIRE(b.smallest_layer < b.largest_layer);  // the preset's dense layers are larger
                CHECK(plan.find("0/") != std::string::npos);  // nothing pinned: it is all ring
                CHECK(plan.find("ahead") != std::string::npos);
            }
            CHECK(bit_identical(got.prefill, resident.prefill));
            REQUIRE(got.decode.size() == resident.decode.size());
            for (size_t i = 0; i < got.decode.size(); ++i) CHECK(bit_identical(got.decode[i], resident.decode[i]));
            CHECK(got.tokens == resident.tokens);
        }
    }
}

TEST_CASE("the next-layer lookahead predicts, and prefetches where the trunk streams") {
    auto model = fixture_model("tiny-wide");
    Budgets b = budgets_of(model);
    EngineOptions o;
    o.model_dir = model.string();
    for (bool streamed : {true, false})
        for (bool lookahead : {true, false}) {
            CAPTURE(streamed);
            CAPTURE(lookahead);
            o.memory = budget(streamed ? gb((b.trunk_edge + b.trunk_all) / 2) : gb(b.trunk_all), gb(b.pool / 2), "", lookahead);
            auto engine = Engine::load(o);
            auto s = engine->new_session(64);
            CancelFlag cancel{false};
            REQUIRE(s->sync(prompt_for(engine->info().n_vocab), cancel).ok());
            // (the prompt's reads ahead are the prefill pipeline's, with or without the lookahead)
            const uint64_t prompt_prefetches = engine->stats().expert_prefetch_reads;
            for (int step = 0; step < 6; ++step) REQUIRE(s->append(argmax(s->logits()), cancel).ok());
            const EngineStats st = engine->stats();
            CHECK(st.expert_prefetch_hits <= st.expert_prefetch_reads);
            CHECK(st.lookahead_confirmed <= st.lookahead_predicted);
            if (!lookahead) {
                CHECK(st.lookahead_predicted == 0);
                CHECK(st.expert_prefetch_reads == prompt_prefetches);
            } else if (streamed) {
                // The trunk streams: the predicted experts are read ahead, and some are then asked for.
                CHECK(st.lookahead_predicted > 0);
                CHECK(st.expert_prefetch_reads > 0);
                CHECK(st.expert_prefetch_hits > 0);
            } else {
                // Trunk resident: predictions are scored (reads wait until they prove precise).
                CHECK(st.lookahead_predicted > 0);
            }
        }
}

TEST_CASE("the prefill pipeline reads the next batch of experts while one computes, with the same bits") {
    // A cache that holds two batches and more but not the pool, the lookahead off (decode-only
    // anyway): every read ahead is the pipeline's. A prompt long enough that each layer's union
    // takes several batches.
    auto model = fixture_model("tiny-wide");
    Budgets b = budgets_of(model);
    const MemoryOptions memory = budget(gb(b.trunk_all), gb(b.pool / 2), "", /*lookahead=*/false);
    EngineOptions o;
    o.model_dir = model.string();
    o.memory = memory;
    auto engine = Engine::load(o);
    const std::vector<int32_t> prompt = k3::test::spread_prompt(engine->info().n_vocab, 48);
    auto s = engine->new_session(64);
    CancelFlag cancel{false};
    REQUIRE(s->sync(prompt, cancel).ok());
    const EngineStats st = engine->stats();
    CHECK(st.lookahead_predicted == 0);
    CHECK(st.expert_prefetch_reads > 0);
    CHECK(st.expert_prefetch_hits > 0);
    CHECK(st.expert_prefetch_hits <= st.expert_prefetch_reads);
    const std::vector<float> pipelined(s->logits().begin(), s->logits().end());

    EngineOptions r;
    r.model_dir = model.string();
    auto resident = Engine::load(r);
    auto rs = resident->new_session(64);
    REQUIRE(rs->sync(prompt, cancel).ok());
    CHECK(bit_identical(pipelined, std::vector<float>(rs->logits().begin(), rs->logits().end())));
}

TEST_CASE("a pass reads each trunk layer and the experts of its union once, each layer's later batches ahead") {
    // The smallest ring (every layer streams) and a cache of half the pool, the lookahead off: a
    // prompt of 48 tokens in one pass, then in passes from an own budget of 12 tokens (the cache
    // lends the rest). Per pass each layer's run is read at most once (a read ahead of the next
    // walk's first layer may have started by the time the stats are read: one pass more), each
    // expert at most once, and only a layer's first batch may wait for reads it issues itself:
    // the pipeline asked for every later one ahead (docs/performance.md, "Prefill pipeline").
    auto model = fixture_model("tiny-wide");
    Budgets b = budgets_of(model);
    const Checkpoint ckpt = open_checkpoint(model);
    int64_t trunk_runs = 0;
    for (const auto& run : ckpt.layer_runs) trunk_runs += run.nbytes;
    int moe_layers = 0;
    for (int il = 0; il < ckpt.config.num_hidden_layers; ++il) moe_layers += ckpt.config.is_dense(il) ? 0 : 1;
    for (const int own_tokens : {48, 12}) {
        CAPTURE(own_tokens);
        EngineOptions o;
        o.model_dir = model.string();
        o.memory = budget(gb(b.trunk_edge + 4096), gb(b.pool / 2), "", /*lookahead=*/false,
                          (double(b.pass.bytes(own_tokens)) + 0.5) / 1e6);
        o.memory.prompt_cache_gb = 0;
        auto engine = Engine::load(o);
        REQUIRE(engine->max_step_tokens() >= own_tokens);
        const int passes = (48 + engine->max_step_tokens() - 1) / engine->max_step_tokens();
        REQUIRE(engine->stats().pinned_layers == 0);
        const std::vector<int32_t> prompt = k3::test::spread_prompt(engine->info().n_vocab, 48);
        auto s = engine->new_session(64);
        CancelFlag cancel{false};
        REQUIRE(s->sync(prompt, cancel).ok());
        const EngineStats st = engine->stats();
        CHECK(st.trunk_bytes_read >= uint64_t(trunk_runs));
        CHECK(st.trunk_bytes_read <= uint64_t((passes + 1) * trunk_runs));
        CHECK(st.expert_bytes_read <= uint64_t(passes * b.pool));
        CHECK(st.expert_prefetch_reads > 0);
        CHECK(st.expert_read_waits <= uint64_t(passes * moe_layers));
        MESSAGE(passes << " pass(es): trunk " << st.trunk_bytes_read << " of " << trunk_runs << " a pass, experts "
                       << st.expert_bytes_read << ", demand reads " << st.expert_read_waits << ", read ahead "
                       << st.expert_prefetch_reads);
    }
}

TEST_CASE("a prefill pass borrows the expert cache's spare slots and gives them back, with the same bits") {
    // An own pass budget of two tokens and a cache that holds the pool: the pass is sized from
    // the slots the cache lends beyond the pipeline's two batches (docs/performance.md, "Prefill
    // passes"), which it gives up during the pass and serves from again after it.
    auto model = fixture_model("tiny-wide");
    Budgets b = budgets_of(model);
    EngineOptions o;
    o.model_dir = model.string();
    o.memory = budget(gb(b.trunk_all), gb(b.pool), "", true, (double(b.pass.bytes(2)) + 0.5) / 1e6);
    o.memory.prompt_cache_gb = 0;
    auto engine = Engine::load(o);
    const std::vector<int32_t> prompt = k3::test::spread_prompt(engine->info().n_vocab, 40);
    REQUIRE(engine->max_step_tokens() >= int(prompt.size()));  // two tokens of its own, the rest lent
    REQUIRE(engine->info().memory_plan.find("lent by the expert cache") != std::string::npos);
    auto s = engine->new_session(64);
    CancelFlag cancel{false};
    REQUIRE(s->sync(prompt, cancel).ok());
    const EngineStats lent = engine->stats();
    CHECK(lent.pass_lent_bytes > 0);
    const std::vector<float> after_prompt(s->logits().begin(), s->logits().end());
    // decode steps lend nothing, and the cache serves them again (the slots are back)
    for (int i = 0; i < 4; ++i) REQUIRE(s->append(argmax(s->logits()), cancel).ok());
    CHECK(engine->stats().pass_lent_bytes == lent.pass_lent_bytes);
    CHECK(engine->stats().expert_hits > lent.expert_hits);

    EngineOptions r;
    r.model_dir = model.string();
    auto resident = Engine::load(r);
    auto rs = resident->new_session(64);
    REQUIRE(rs->sync(prompt, cancel).ok());
    CHECK(bit_identical(after_prompt, std::vector<float>(rs->logits().begin(), rs->logits().end())));
}

TEST_CASE("a prefill pass borrows the lm_head and pinned trunk layers, reads each once a pass and gives them back, with the same bits") {
    // The trunk pinned whole and a cache of only the pipeline's two batches (nothing to lend), a
    // one-token own budget: the pass is sized by the lm_head and the pinned layers it unpins
    // (docs/performance.md, "Prefill passes"). A lent layer is read once in each pass, the lm_head
    // once in each pass that borrowed it (before its output product), and both are back after the
    // prompt: the first decode step reads the layers the last pass lent, the next reads none.
    for (std::string preset : {"tiny", "tiny-wide"}) {
        CAPTURE(preset);
        auto model = fixture_model(preset);
        Budgets b = budgets_of(model);
        const Checkpoint ckpt = open_checkpoint(model);
        const io::ModelFootprint f = io::footprint_of(ckpt);
        const int n_layers = ckpt.config.num_hidden_layers;
        const int64_t two_batches = int64_t(2 * f.experts_per_token + 8) * f.expert_slot_bytes;
        EngineOptions o;
        o.model_dir = model.string();
        o.memory = budget(gb(b.trunk_all), gb(two_batches + 4096), "", true, (double(b.pass.bytes(1)) + 0.5) / 1e6);
        o.memory.prompt_cache_gb = 0;
        // the plan the engine makes (the same function, the same footprint)
        const io::MemoryPlan plan = io::make_memory_plan(f, o.memory, io::read_mem_available());
        REQUIRE(plan.trunk.n_pinned == n_layers);
        REQUIRE(plan.pass_lent_slots == 0);
        auto engine = Engine::load(o);
        const int T = engine->max_step_tokens();
        REQUIRE(T == plan.chunk_tokens);
        REQUIRE(T > 4);  // the lent memory holds several tokens
        MESSAGE(preset << ": " << engine->info().memory_plan);
        // three passes and a part
        const int n = std::min(3 * T + T / 2, engine->info().n_ctx_max - 8);
        const std::vector<int32_t> prompt = k3::test::spread_prompt(engine->info().n_vocab, n);
        auto s = engine->new_session(n + 8);
        CancelFlag cancel{false};
        const EngineStats s0 = engine->stats();
        CHECK(s0.resident_pinned_layers == 0);  // pinned layers are read at their first use
        REQUIRE(s->sync(prompt, cancel).ok());
        const EngineStats s1 = engine->stats();
        // What each pass borrowed, by the plan's rule. The first pass reads every layer; a later
        // one reads again the layers out at its start (lent to the pass before) and those it
        // lends itself (their pages go back at its start); the lm_head is read again before the
        // output product of every pass that borrowed it (each leaves its last token's logits).
        std::vector<io::PassLoan> loans;
        int64_t reread_bytes = 0;
        uint64_t unpinned = 0, reread = 0, lm_head_lent = 0;
        for (int p0 = 0; p0 < n; p0 += T) {
            loans.push_back(plan.loan_for(b.pass.bytes(std::min(T, n - p0))));
            unpinned += loans.back().layers.size();
            lm_head_lent += loans.back().lm_head ? 1 : 0;
            if (p0 == 0) continue;
            std::set<int> out(loans.back().layers.begin(), loans.back().layers.end());
            out.insert(loans[loans.size() - 2].layers.begin(), loans[loans.size() - 2].layers.end());
            for (int il : out) {
                reread++;
                reread_bytes += ckpt.layer_runs[size_t(il)].nbytes;
            }
        }
        REQUIRE(loans.size() >= 3);
        REQUIRE(!loans.front().layers.empty());
        REQUIRE(loans.front().lm_head);
        int64_t trunk_runs = 0;
        for (const auto& run : ckpt.layer_runs) trunk_runs += run.nbytes;
        CHECK(s1.passes - s0.passes == loans.size());
        CHECK(s1.pass_unpinned_layers - s0.pass_unpinned_layers == unpinned);
        CHECK(s1.trunk_layer_reads - s0.trunk_layer_reads == uint64_t(n_layers) + reread);
        CHECK(s1.trunk_bytes_read - s0.trunk_bytes_read == uint64_t(trunk_runs + reread_bytes));
        CHECK(s1.lm_head_reads - s0.lm_head_reads == lm_head_lent);
        CHECK(s1.pass_lent_bytes > s0.pass_lent_bytes);
        // After the prompt the last pass's lent layers are out; the first decode step reads them
        // back, the second reads none, and neither reads the lm_head.
        CHECK(s1.resident_pinned_layers == n_layers - int(loans.back().layers.size()));
        const std::vector<float> after_prompt(s->logits().begin(), s->logits().end());
        std::vector<int32_t> ids;
        ids.push_back(argmax(s->logits()));
        REQUIRE(s->append(ids.back(), cancel).ok());
        const EngineStats s2 = engine->stats();
        CHECK(s2.trunk_layer_reads - s1.trunk_layer_reads == loans.back().layers.size());
        CHECK(s2.resident_pinned_layers == n_layers);
        ids.push_back(argmax(s->logits()));
        REQUIRE(s->append(ids.back(), cancel).ok());
        const EngineStats s3 = engine->stats();
        CHECK(s3.trunk_layer_reads == s2.trunk_layer_reads);
        CHECK(s3.lm_head_reads == s1.lm_head_reads);
        CHECK(s3.pass_lent_bytes == s1.pass_lent_bytes);  // decode steps borrow nothing
        ids.push_back(argmax(s->logits()));

        // The same bits as everything resident.
        EngineOptions r;
        r.model_dir = model.string();
        auto resident = Engine::load(r);
        auto rs = resident->new_session(n + 8);
        REQUIRE(rs->sync(prompt, cancel).ok());
        CHECK(bit_identical(after_prompt, std::vector<float>(rs->logits().begin(), rs->logits().end())));
        std::vector<int32_t> rids;
        for (int i = 0; i < 3; ++i) {
            rids.push_back(argmax(rs->logits()));
            if (i < 2) REQUIRE(rs->append(rids.back(), cancel).ok());
        }
        CHECK(rids == ids);
    }
}

TEST_CASE("a shard truncated after start-up fails the step with the file named, never a wrong token") {
    auto src = fixture_model("tiny");
    auto model = tmp_root() / "io-identity-truncated";
    std::filesystem::remove_all(model);
    std::filesystem::copy(src, model);
    Budgets b = budgets_of(model);
    EngineOptions o;
    o.model_dir = model.string();
    o.memory = budget(gb(b.trunk_edge + 4096), gb(b.cache_min + 4096));
    auto engine = Engine::load(o);
    // Cut every shard in half: the streamed layers and experts beyond the cut are gone.
    for (const auto& e : std::filesystem::directory_iterator(model))
        if (e.path().extension() == ".safetensors")
            std::filesystem::resize_file(e.path(), std::filesystem::file_size(e.path()) / 2);
    auto s = engine->new_session(64);
    CancelFlag cancel{false};
    Status st = s->sync(prompt_for(engine->info().n_vocab), cancel);
    CHECK(st.code == StatusCode::IoError);
    CHECK(st.message.find(".safetensors") != std::string::npos);
    CHECK(st.message.find("at offset") != std::string::npos);
}

namespace {

// pack-trunk (with `pack_flags`) into `name`, start an engine streaming that pack, cut trunk.bin
// to 4 KiB: the next step must fail with an I/O error that names the file.
void check_truncated_pack_fails_the_step(const char* name, const std::string& pack_flags) {
    auto model = fixture_model("tiny");
    auto pack = tmp_root() / name;
    std::filesystem::remove_all(pack);
    REQUIRE(sh(bin() + " pack-trunk " + model.string() + " " + pack.string() + pack_flags + " --quiet") == 0);
    Budgets b = budgets_of(model);
    EngineOptions o;
    o.model_dir = model.string();
    o.memory = budget(gb(b.trunk_edge + 4096), -1, pack.string());
    auto engine = Engine::load(o);
    std::filesystem::resize_file(pack / "trunk.bin", 4096);
    auto s = engine->new_session(64);
    CancelFlag cancel{false};
    Status st = s->sync(prompt_for(engine->info().n_vocab), cancel);
    CHECK(st.code == StatusCode::IoError);
    CHECK(st.message.find("trunk.bin") != std::string::npos);
}

}  // namespace

TEST_CASE("a packed trunk truncated after start-up fails the step naming trunk.bin") {
    check_truncated_pack_fails_the_step("io-identity-pack-truncated", "");
}

TEST_CASE("a compressed trunk truncated after start-up fails the step naming trunk.bin") {
    check_truncated_pack_fails_the_step("io-identity-zpack-truncated", " --compress");
}

TEST_CASE("a packed trunk that does not match the checkpoint is refused at load") {
    auto model = fixture_model("tiny");
    auto pack = tmp_root() / "io-identity-pack-stale";
    std::filesystem::remove_all(pack);
    REQUIRE(sh(bin() + " pack-trunk " + model.string() + " " + pack.string() + " --quiet") == 0);
    EngineOptions o;
    o.model_dir = model.string();
    o.memory.trunk_dir = pack.string();
    SUBCASE("bytes changed") {
        // Flip a byte at the start of layer 1's run in trunk.bin.
        Checkpoint ckpt = open_checkpoint(model);
        io::TrunkPack p = io::open_trunk_pack(pack, ckpt);
        std::FILE* f = std::fopen((pack / "trunk.bin").c_str(), "r+b");
        REQUIRE(f);
        std::fseek(f, long(p.layers[1].file_offset), SEEK_SET);
        int c = std::fgetc(f);
        std::fseek(f, long(p.layers[1].file_offset), SEEK_SET);
        std::fputc(c ^ 0x5a, f);
        std::fclose(f);
        CHECK_THROWS_WITH_AS(Engine::load(o), doctest::Contains("layer 1: bytes differ"), Error);
    }
    SUBCASE("trunk.bin missing") {
        std::filesystem::remove(pack / "trunk.bin");
        CHECK_THROWS_WITH_AS(Engine::load(o), doctest::Contains("trunk.bin is missing"), Error);
    }
}

TEST_CASE("a compressed trunk whose bytes changed is refused at load") {
    auto model = fixture_model("tiny");
    auto pack = tmp_root() / "io-identity-zpack-stale";
    std::filesystem::remove_all(pack);
    REQUIRE(sh(bin() + " pack-trunk " + model.string() + " " + pack.string() + " --compress --quiet") == 0);
    Checkpoint ckpt = open_checkpoint(model);
    io::TrunkPack p = io::open_trunk_pack(pack, ckpt);
    REQUIRE(p.compressed);
    // A byte of layer 1's first block, past its header: a low byte or a 4-bit code changes.
    std::FILE* f = std::fopen((pack / "trunk.bin").c_str(), "r+b");
    REQUIRE(f);
    const long at = long(p.layers[1].file_offset) + 40;
    std::fseek(f, at, SEEK_SET);
    int c = std::fgetc(f);
    std::fseek(f, at, SEEK_SET);
    std::fputc(c ^ 0x5a, f);
    std::fclose(f);
    EngineOptions o;
    o.model_dir = model.string();
    o.memory.trunk_dir = pack.string();
    CHECK_THROWS_WITH_AS(Engine::load(o), doctest::Contains("layer 1: "), Error);
}


TEST_CASE("k3serve run takes the memory options and reports them") {
    auto model = fixture_model("tiny");
    Budgets b = budgets_of(model);
    auto report = tmp_root() / "io-identity-run-report.json";
    char args[256];
    std::snprintf(args, sizeof args, " --ids 1,2,3 --gen 3 --trunk-gb %.9f --cache-gb %.9f --report ", gb(b.trunk_edge + 4096),
                  gb(b.cache_min + 4096));
    REQUIRE(sh(bin() + " run " + model.string() + args + report.string()) == 0);
    std::ifstream in(report);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const char* key : {"\"ring_bytes\"", "\"pinned_layers\"", "\"expert_evictions\"", "\"io_share\"",
                            "\"trunk_bytes_read\"", "\"expert_bytes_read\"", "\"read_mb_per_s\""})
        CHECK(text.find(key) != std::string::npos);
    // Usage errors: unknown preset, a ring that does not fit.
    CHECK(sh(bin() + " run " + model.string() + " --ids 1,2 --preset huge") == 2);
    CHECK(sh(bin() + " run " + model.string() + " --ids 1,2 --trunk-gb 0.000001") == 2);
}
