// The prompt cache's disk tier (engine/api/prompt_cache_disk.h): a state written and read back
// is the same bits; an engine started again on the directory resumes from it and gets a cold
// run's logits; a state evicted from RAM comes back from disk; a file with one damaged byte, or
// written for another model, is refused (counted, removed) and the prefix is recomputed.
#include <doctest/doctest.h>

#include <fstream>

#include "api/prompt_cache_disk.h"
#include "model/model_test_util.h"

using namespace k3;
using namespace k3::test;
namespace fs = std::filesystem;

namespace {

constexpr int kSeed = 9;

std::string model_dir() { return cached_model("tiny", kSeed); }

std::unique_ptr<Engine> load_with_disk(const fs::path& dir, double ram_gb = 0.05, double disk_gb = -1) {
    EngineOptions o;
    o.model_dir = model_dir();
    o.threads = 2;
    o.memory.prompt_cache_gb = ram_gb;
    o.memory.prompt_cache_dir = dir.string();
    o.memory.prompt_cache_dir_gb = disk_gb;
    return Engine::load(o);
}

std::vector<float> cold_logits(const std::vector<int32_t>& ids) { return cold_logits_of(model_dir(), ids); }

std::vector<fs::path> cache_files(const fs::path& dir) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".k3pc") out.push_back(e.path());
    return out;
}

void flip_byte(const fs::path& file, int64_t offset) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f);
    f.seekg(offset);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x10);
    f.seekp(offset);
    f.write(&c, 1);
}

PromptState some_state(const PromptStateShape& shape, size_t n, bool logits) {
    PromptState s;
    for (size_t i = 0; i < n; ++i) s.tokens.push_back(int32_t(i * 7 + 3));
    uint32_t x = 12345;
    auto next = [&x] {
        x = x * 1664525u + 1013904223u;
        float f;
        std::memcpy(&f, &x, sizeof f);  // any bit pattern, NaNs included: bits must survive
        return f;
    };
    s.rows.resize(size_t(shape.n_mla) * n * size_t(shape.row_floats));
    for (float& f : s.rows) f = next();
    s.kda.resize(size_t(shape.kda_floats));
    for (float& f : s.kda) f = next();
    if (logits) {
        s.logits.resize(size_t(shape.n_vocab));
        for (float& f : s.logits) f = next();
    }
    return s;
}

bool same_state(const PromptState& a, const PromptState& b) {
    auto same = [](const std::vector<float>& x, const std::vector<float>& y) {
        return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
    };
    return a.tokens == b.tokens && same(a.rows, b.rows) && same(a.kda, b.kda) && same(a.logits, b.logits);
}

}  // namespace

TEST_CASE("prompt cache disk: a state written and read back is the same bits; another model's file is refused") {
    const fs::path dir = scratch_dir("pcdisk-unit");
    const PromptStateShape shape{3, 40, 500, 64};
    // b holds the first 9 of a's 17 tokens, without logits
    const PromptState a = some_state(shape, 17, true), b = some_state(shape, 9, false);
    {
        PromptCacheDisk disk(dir, 1 << 20, "00000000000000aa", shape);
        disk.store(a);
        disk.store(b);
        CHECK(disk.stats().writes == 2);
        CHECK(disk.stats().files == 2);
    }
    SUBCASE("read back by a new instance (a restart): the same bits") {
        PromptCacheDisk disk(dir, 1 << 20, "00000000000000aa", shape);
        CHECK(disk.stats().files == 2);
        CHECK(disk.longest(0, a.tokens, 0) == a.tokens.size());
        // b has no logits: it serves a longer prompt, not itself as a whole
        CHECK(disk.longest(0, b.tokens, 0) == 0);
        std::vector<int32_t> longer = b.tokens;
        longer.push_back(5);
        CHECK(disk.longest(0, longer, 0) == b.tokens.size());
        PromptState got;
        REQUIRE(disk.load(0, a.tokens, &got));
        CHECK(same_state(got, a));
        REQUIRE(disk.load(0, b.tokens, &got));
        CHECK(same_state(got, b));
        CHECK(disk.stats().hits == 2);
        CHECK(disk.stats().refused == 0);
    }
    SUBCASE("another model's fingerprint: refused, counted, removed") {
        PromptCacheDisk disk(dir, 1 << 20, "00000000000000bb", shape);
        PromptState got;
        CHECK(disk.longest(0, a.tokens, 0) == a.tokens.size());  // the header alone is not trusted
        CHECK_FALSE(disk.load(0, a.tokens, &got));
        CHECK(disk.stats().refused == 1);
        CHECK(disk.longest(0, a.tokens, 0) == b.tokens.size());  // only b (a prefix of a) is left
        CHECK(cache_files(dir).size() == 1);
    }
    SUBCASE("a state of another shape: refused") {
        PromptStateShape other = shape;
        other.kda_floats = 501;
        PromptCacheDisk disk(dir, 1 << 20, "00000000000000aa", other);
        PromptState got;
        CHECK_FALSE(disk.load(0, a.tokens, &got));
        CHECK(disk.stats().refused == 1);
    }
    SUBCASE("the budget: the least recently used file goes") {
        const int64_t one_file = int64_t(fs::file_size(cache_files(dir)[0]));
        PromptCacheDisk disk(dir, 1 << 20, "00000000000000aa", shape);
        PromptState got;
        REQUIRE(disk.load(0, b.tokens, &got));  // b used last
        PromptCacheDisk smaller(dir, 2 * one_file + 10, "00000000000000aa", shape);  // a third one will not fit
        smaller.store(some_state(shape, 12, true));
        CHECK(smaller.stats().evictions >= 1);
        CHECK(smaller.stats().bytes <= smaller.stats().budget);
    }
}

TEST_CASE("prompt cache disk: an engine started again on the directory resumes with a cold run's bits") {
    const fs::path dir = scratch_dir("pcdisk-restart");
    CancelFlag cancel{false};
    std::vector<int32_t> prompt, longer;
    {
        auto e = load_with_disk(dir);
        const int V = e->info().n_vocab;
        prompt = test_prompt(40, V, 3);
        longer = prompt;
        for (int32_t t : test_prompt(6, V, 4)) longer.push_back(t);
        auto s = e->new_session(128);
        int reused = -1;
        REQUIRE(s->sync(prompt, cancel, &reused).ok());
        CHECK(reused == 0);
        CHECK(e->stats().prompt_cache_disk_writes >= 1);  // the prompt's end, written through
        CHECK(e->stats().prompt_cache_disk_bytes > 0);
    }
    REQUIRE_FALSE(cache_files(dir).empty());

    SUBCASE("the same prompt: nothing evaluated, the cold bits") {
        auto e = load_with_disk(dir);
        auto s = e->new_session(128);
        int reused = -1;
        REQUIRE(s->sync(prompt, cancel, &reused).ok());
        CHECK(reused == int(prompt.size()));
        CHECK(e->stats().tokens_evaluated == 0);
        CHECK(e->stats().prompt_cache_disk_hits == 1);
        CHECK(same_bits(s->logits(), cold_logits(prompt)));
    }
    SUBCASE("a longer prompt resumes after the stored prefix") {
        auto e = load_with_disk(dir);
        auto s = e->new_session(128);
        int reused = -1;
        REQUIRE(s->sync(longer, cancel, &reused).ok());
        CHECK(reused == int(prompt.size()));
        CHECK(same_bits(s->logits(), cold_logits(longer)));
    }
    SUBCASE("one damaged byte: refused, removed, the prefix recomputed") {
        for (const fs::path& f : cache_files(dir)) flip_byte(f, int64_t(fs::file_size(f)) / 2);
        auto e = load_with_disk(dir);
        auto s = e->new_session(128);
        int reused = -1;
        REQUIRE(s->sync(prompt, cancel, &reused).ok());
        CHECK(reused == 0);
        CHECK(e->stats().prompt_cache_disk_refused >= 1);
        CHECK(e->stats().prompt_cache_disk_hits == 0);
        CHECK(e->stats().tokens_evaluated == prompt.size());
        CHECK(same_bits(s->logits(), cold_logits(prompt)));
        // the recomputed state replaced the damaged file: a third start resumes from it
        auto e2 = load_with_disk(dir);
        auto s2 = e2->new_session(128);
        REQUIRE(s2->sync(prompt, cancel, &reused).ok());
        CHECK(reused == int(prompt.size()));
        CHECK(e2->stats().prompt_cache_disk_refused == 0);
        CHECK(same_bits(s2->logits(), cold_logits(prompt)));
    }
}

TEST_CASE("prompt cache disk: a state evicted from RAM comes back from disk") {
    const fs::path dir = scratch_dir("pcdisk-evict");
    const int64_t one = one_snapshot_bytes(model_dir(), 20);
    REQUIRE(one > 0);
    auto e = load_with_disk(dir, double(one) * 2.5 / 1e9);
    const int V = e->info().n_vocab;
    CancelFlag cancel{false};
    auto s = e->new_session(64);
    for (int k = 0; k < 5; ++k) REQUIRE(s->sync(test_prompt(20, V, 30 + k), cancel).ok());
    REQUIRE(e->stats().prompt_cache_evictions >= 2);
    const uint64_t evaluated = e->stats().tokens_evaluated;
    auto again = e->new_session(64);
    int reused = -1;
    REQUIRE(again->sync(test_prompt(20, V, 30), cancel, &reused).ok());
    CHECK(reused == 20);
    CHECK(e->stats().tokens_evaluated == evaluated);
    CHECK(e->stats().prompt_cache_disk_hits == 1);
    CHECK(same_bits(again->logits(), cold_logits(test_prompt(20, V, 30))));
    CHECK(e->stats().prompt_cache_bytes <= e->stats().prompt_cache_budget);
}
