// Background loading (MemoryOptions::background_load, everything resident): Engine::load returns
// once the trunk is read and the routed experts are read behind it. A step that needs an expert
// not read yet reads it first, so every logit is bit-identical to a fully loaded engine's; a read
// that fails fails the step that needs it with an IoError naming the file, never a wrong token;
// Engine::weights_load() says how far the load got. The test hook
// MemoryOptions::hold_background_load keeps the background reads from running, so the steps
// really run while experts are unread.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "common/background_load.h"
#include "common/engine_outputs.h"
#include "common/model_cache.h"
#include "common/scratch.h"
#include "k3/engine.h"

using namespace k3;

namespace {

using k3::test::bit_identical;
using Outputs = k3::test::EngineOutputs;

std::vector<int32_t> prompt_for(int vocab) { return k3::test::spread_prompt(vocab, 5); }

Outputs run(Engine& engine) { return k3::test::record_outputs(engine, prompt_for(engine.info().n_vocab), 3); }

// `hold`: the test hook's file (MemoryOptions::hold_background_load), "" for none.
std::unique_ptr<Engine> load(const std::string& model, bool background, const std::string& hold = {}) {
    EngineOptions o;
    o.model_dir = model;
    o.memory.background_load = background;
    o.memory.hold_background_load = hold;
    return Engine::load(o);
}


// Waits (bounded: a stuck load fails the test instead of hanging it) for the load to finish.
bool wait_loaded(const Engine& engine) {
    for (int i = 0; i < 6000; ++i) {
        if (engine.weights_load().complete()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

}  // namespace

TEST_CASE("steps run while the experts load give the logits of a fully loaded engine") {
    for (std::string preset : {"tiny", "tiny-wide"}) {
        INFO(preset);
        const std::string model = k3::test::cached_model(preset);
        Outputs want;
        {
            auto eager = load(model, false);
            const WeightsLoad w = eager->weights_load();
            CHECK(w.total_bytes > 0);
            CHECK(w.complete());
            want = run(*eager);
        }
        k3::test::HoldBackgroundLoad hold;
        auto engine = load(model, true, hold.file);
        const WeightsLoad at_ready = engine->weights_load();
        CHECK(at_ready.loaded_bytes < at_ready.total_bytes);  // only the trunk
        Outputs got = run(*engine);
        // The hold kept the background reads back: these steps ran while experts were unread,
        // the ones they needed read for them.
        const WeightsLoad after = engine->weights_load();
        CHECK(after.loaded_bytes < after.total_bytes);
        CHECK(bit_identical(got.prefill, want.prefill));
        REQUIRE(got.decode.size() == want.decode.size());
        for (size_t i = 0; i < want.decode.size(); ++i) CHECK(bit_identical(got.decode[i], want.decode[i]));

        hold.release();
        REQUIRE(wait_loaded(*engine));
        CHECK(engine->weights_load().failures == 0);
        Outputs loaded = run(*engine);
        CHECK(bit_identical(loaded.prefill, want.prefill));
        for (size_t i = 0; i < want.decode.size(); ++i) CHECK(bit_identical(loaded.decode[i], want.decode[i]));
        CHECK(engine->stats().expert_read_failures == 0);
    }
}

TEST_CASE("an expert whose background read fails fails the step that needs it, naming the file") {
    auto model = k3::test::process_scratch_root() / "io-background-truncated";
    std::filesystem::remove_all(model);
    std::filesystem::copy(k3::test::cached_model("tiny"), model);
    k3::test::HoldBackgroundLoad hold;
    auto engine = load(model.string(), true, hold.file);
    // The trunk is in memory; the experts behind the first shard's last trunk run are not, and
    // now never can be.
    REQUIRE(k3::test::cut_experts_after_trunk(model));
    auto s = engine->new_session(64);
    CancelFlag cancel{false};
    Status st = s->sync(prompt_for(engine->info().n_vocab), cancel);
    CHECK(st.code == StatusCode::IoError);
    CHECK(st.message.find(".safetensors") != std::string::npos);
    CHECK(st.message.find("at offset") != std::string::npos);
    const WeightsLoad w = engine->weights_load();
    CHECK(w.failures > 0);
    CHECK(w.first_failure.find(".safetensors") != std::string::npos);
    CHECK_FALSE(w.complete());
    CHECK(engine->stats().expert_read_failures > 0);
    // The same step again fails the same way (the failed piece is not silently skipped).
    CHECK(s->sync(prompt_for(engine->info().n_vocab), cancel).code == StatusCode::IoError);
    // Released, the rest of the load fails too, and the engine still goes away cleanly.
    hold.release();
}

TEST_CASE("without background loading, a shard cut short fails the load itself") {
    auto model = k3::test::process_scratch_root() / "io-eager-truncated";
    std::filesystem::remove_all(model);
    std::filesystem::copy(k3::test::cached_model("tiny"), model);
    // Keep the header (the checkpoint opens) but lose the tensors.
    for (const auto& e : std::filesystem::directory_iterator(model))
        if (e.path().extension() == ".safetensors")
            std::filesystem::resize_file(e.path(), std::filesystem::file_size(e.path()) - 4096);
    CHECK_THROWS(load(model.string(), false));
}
