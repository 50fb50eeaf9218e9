// The prompt cache's partitions (engine/api/prompt_cache.h; docs/operations.md "The prompt cache
// and API keys"): a state made in one partition is never restored, resumed from or hinted at
// (Match::matched) in another, even for the very same tokens; the byte budget is one for all
// partitions and evicts the least recently used entry of any; the disk tier files each state under
// its partition, reads it back only there after a restart, and refuses a file of the format before
// partitions (version 1). Through sessions: another partition's live state is dropped, and every
// resume still has a cold run's bits.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "api/prompt_cache.h"
#include "model/model_test_util.h"
#include "model/state.h"
#include "weights/config.h"

using namespace k3;
using namespace k3::test;
namespace fs = std::filesystem;

namespace {

constexpr int kSeed = 11;
constexpr uint64_t kA = 0x1111, kB = 0x2222, kC = 0x3333;

std::string model_dir() { return cached_model("tiny", kSeed); }

const ModelConfig& config() {
    static const ModelConfig cfg = load_config(fs::path(model_dir()) / "config.json");
    return cfg;
}

std::vector<int32_t> tokens_of(size_t n, int salt) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < n; ++i) t.push_back(int32_t((i * 13 + size_t(salt) * 7 + 1) % 200));
    return t;
}

// A state of `tokens` whose every float says which partition made it (`mark`), so a restore
// shows whose state it got.
SequenceState marked_state(const std::vector<int32_t>& tokens, float mark) {
    SequenceState st(config(), 64);
    st.n_past = int(tokens.size());
    std::fill(st.mla_rows.begin(), st.mla_rows.end(), mark);
    std::fill(st.kda.begin(), st.kda.end(), mark);
    return st;
}

std::vector<float> logits_of(float mark) { return std::vector<float>(size_t(config().vocab_size), mark); }

// What a restore of `tokens` in `partition` puts into a fresh state: the KDA snapshot's first
// float and the logits' (NAN when nothing was restored).
std::pair<float, float> restored_mark(PromptCache& cache, uint64_t partition, const std::vector<int32_t>& tokens) {
    const PromptCache::Match m = cache.find(partition, tokens);
    if (m.resume != tokens.size()) return {NAN, NAN};
    SequenceState st(config(), 64);
    std::vector<float> logits(size_t(config().vocab_size), NAN);
    if (!cache.restore(partition, tokens, m.resume, st, logits)) return {NAN, NAN};
    return {st.kda[0], logits[0]};
}

int entries_of(const PromptCache& cache, uint64_t partition, size_t tokens) {
    int n = 0;
    for (const PromptCache::EntrySummary& e : cache.entries()) n += e.partition == partition && e.tokens == tokens;
    return n;
}

std::vector<fs::path> cache_files(const fs::path& dir) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".k3pc") out.push_back(e.path());
    return out;
}

PromptStateShape shape_of_config() {
    const SequenceState st(config(), 1);
    int n_mla = 0;
    for (int il = 0; il < config().num_hidden_layers; ++il) n_mla += config().is_mla(il) ? 1 : 0;
    return {n_mla, st.mla_row_floats, int64_t(st.kda.size()), int64_t(config().vocab_size)};
}

PromptState disk_state(const PromptStateShape& shape, uint64_t partition, const std::vector<int32_t>& tokens,
                       float mark) {
    PromptState s;
    s.partition = partition;
    s.tokens = tokens;
    s.rows.assign(size_t(shape.n_mla) * tokens.size() * size_t(shape.row_floats), mark);
    s.kda.assign(size_t(shape.kda_floats), mark);
    s.logits.assign(size_t(shape.n_vocab), mark);
    return s;
}

}  // namespace

TEST_CASE("prompt cache partitions: the same tokens in two partitions are two entries, each restored only in its own") {
    PromptCache cache(64 << 20, config());
    const std::vector<int32_t> t = tokens_of(20, 1);
    cache.insert(kA, t, marked_state(t, 1.0f), logits_of(1.0f));

    // Nothing in B: no resume, and no hint of how far A's tokens go either.
    const std::vector<int32_t> longer = tokens_of(30, 1);  // t and 10 more
    CHECK(cache.find(kB, t).resume == 0);
    CHECK(cache.find(kB, t).matched == 0);
    CHECK(cache.find(kB, longer).matched == 0);
    CHECK(cache.find(kA, longer).matched == t.size());
    SequenceState st(config(), 64);
    std::vector<float> logits(size_t(config().vocab_size));
    CHECK_FALSE(cache.restore(kB, t, t.size(), st, logits));  // even when asked for A's resume point
    CHECK(st.n_past == 0);

    cache.insert(kB, t, marked_state(t, 2.0f), logits_of(2.0f));
    CHECK(restored_mark(cache, kA, t) == std::pair{1.0f, 1.0f});
    CHECK(restored_mark(cache, kB, t) == std::pair{2.0f, 2.0f});
    CHECK(std::isnan(restored_mark(cache, kC, t).first));
    CHECK(entries_of(cache, kA, t.size()) == 1);
    CHECK(entries_of(cache, kB, t.size()) == 1);
    CHECK(cache.stats().snapshots == 2);

    // A prefix stored in A serves a longer prompt in A only.
    const std::vector<int32_t> prefix(t.begin(), t.begin() + 12);
    cache.insert(kA, prefix, marked_state(prefix, 3.0f), {});
    std::vector<int32_t> other = prefix;
    other.push_back(199);
    CHECK(cache.find(kA, other).resume == prefix.size());
    CHECK(cache.find(kB, other).resume == 0);
    CHECK(cache.find(kB, other).matched == prefix.size());  // B's own t shares those 12 tokens
}

TEST_CASE("prompt cache partitions: one budget for all, the least recently used entry of any partition goes first") {
    const std::vector<int32_t> a1 = tokens_of(16, 1), b1 = tokens_of(16, 2), a2 = tokens_of(16, 3), b2 = tokens_of(16, 4);
    int64_t one = 0;
    {
        PromptCache probe(64 << 20, config());
        probe.insert(kA, a1, marked_state(a1, 1.0f), logits_of(1.0f));
        one = probe.stats().bytes;
    }
    REQUIRE(one > 0);
    PromptCache cache(3 * one + one / 2, config());  // room for three such entries
    cache.insert(kA, a1, marked_state(a1, 1.0f), logits_of(1.0f));
    cache.insert(kB, b1, marked_state(b1, 2.0f), logits_of(2.0f));
    cache.insert(kA, a2, marked_state(a2, 3.0f), logits_of(3.0f));
    CHECK(cache.stats().evictions == 0);
    // a1 used again: b1 is now the least recently used of all
    CHECK(restored_mark(cache, kA, a1).first == 1.0f);

    cache.insert(kB, b2, marked_state(b2, 4.0f), logits_of(4.0f));
    CHECK(cache.stats().evictions == 1);
    CHECK(cache.stats().bytes <= cache.budget());
    CHECK(entries_of(cache, kB, b2.size()) == 1);  // b2 (b1 has the same length)
    CHECK(std::isnan(restored_mark(cache, kB, b1).first));  // B's own older entry went, not A's
    CHECK(restored_mark(cache, kA, a1).first == 1.0f);
    CHECK(restored_mark(cache, kA, a2).first == 3.0f);
    CHECK(restored_mark(cache, kB, b2).first == 4.0f);

    // Another partition's insertions push A out as they would in one shared tree.
    for (int k = 0; k < 3; ++k) {
        const std::vector<int32_t> c = tokens_of(16, 10 + k);
        cache.insert(kC, c, marked_state(c, 5.0f), logits_of(5.0f));
    }
    CHECK(cache.stats().bytes <= cache.budget());
    CHECK(std::isnan(restored_mark(cache, kA, a1).first));
    CHECK(std::isnan(restored_mark(cache, kA, a2).first));
    CHECK(std::isnan(restored_mark(cache, kB, b2).first));
}

TEST_CASE("prompt cache partitions: the disk tier files each state under its partition, also across a restart") {
    const fs::path dir = scratch_dir("pcdisk-partitions");
    const PromptStateShape shape = shape_of_config();
    const std::vector<int32_t> t = tokens_of(10, 5);
    {
        PromptCacheDisk disk(dir, 1 << 26, "00000000000000aa", shape);
        disk.store(disk_state(shape, kA, t, 1.0f));
        disk.store(disk_state(shape, kB, t, 2.0f));  // the same tokens: a second file, not a duplicate
        CHECK(disk.stats().files == 2);
        CHECK(disk.has(kA, t, true));
        CHECK_FALSE(disk.has(kC, t, false));
    }
    PromptCacheDisk disk(dir, 1 << 26, "00000000000000aa", shape);  // a restart
    CHECK(disk.stats().files == 2);
    CHECK(disk.stats().refused == 0);
    CHECK(disk.longest(kA, t, 0) == t.size());
    CHECK(disk.longest(kB, t, 0) == t.size());
    CHECK(disk.longest(kC, t, 0) == 0);
    PromptState got;
    CHECK_FALSE(disk.load(kC, t, &got));
    REQUIRE(disk.load(kA, t, &got));
    CHECK(got.partition == kA);
    CHECK(got.kda[0] == 1.0f);
    REQUIRE(disk.load(kB, t, &got));
    CHECK(got.partition == kB);
    CHECK(got.kda[0] == 2.0f);
    CHECK(disk.stats().refused == 0);

    SUBCASE("the RAM cache over it: a state evicted from RAM comes back in its own partition only") {
        PromptCache cache(64 << 20, config());
        cache.set_disk_tier(std::make_unique<PromptCacheDisk>(dir, 1 << 26, "00000000000000aa", shape));
        CHECK(restored_mark(cache, kB, t) == std::pair{2.0f, 2.0f});
        CHECK(restored_mark(cache, kA, t) == std::pair{1.0f, 1.0f});
        CHECK(std::isnan(restored_mark(cache, kC, t).first));
        CHECK(cache.find(kC, t).matched == 0);
        CHECK(cache.stats().disk.hits == 2);
    }
}

TEST_CASE("prompt cache partitions: a disk file of format 1 (before partitions) is refused and removed when indexed") {
    const fs::path dir = scratch_dir("pcdisk-format1");
    const PromptStateShape shape = shape_of_config();
    const std::vector<int32_t> t = tokens_of(10, 6);
    {
        PromptCacheDisk disk(dir, 1 << 26, "00000000000000aa", shape);
        disk.store(disk_state(shape, 0, t, 1.0f));
    }
    REQUIRE(cache_files(dir).size() == 1);
    // The same file as version 1 wrote it: the version field (after the 8-byte magic) says 1.
    {
        std::fstream f(cache_files(dir)[0], std::ios::in | std::ios::out | std::ios::binary);
        REQUIRE(f);
        const uint32_t one = 1;
        f.seekp(8);
        f.write(reinterpret_cast<const char*>(&one), sizeof one);
    }
    PromptCacheDisk disk(dir, 1 << 26, "00000000000000aa", shape);
    CHECK(disk.stats().refused == 1);
    CHECK(disk.stats().files == 0);
    CHECK(disk.longest(0, t, 0) == 0);
    CHECK(cache_files(dir).empty());
}

TEST_CASE("prompt cache partitions: sessions resume only their own partition's states, with a cold run's bits") {
    auto e = load_engine(model_dir(), 2);
    const int V = e->info().n_vocab;
    const std::vector<int32_t> prompt = test_prompt(24, V, 7);
    const std::vector<float> cold = cold_logits_of(model_dir(), prompt);
    REQUIRE_FALSE(cold.empty());
    CancelFlag cancel{false};
    int reused = -1;

    auto a = e->new_session(64);
    a->set_cache_partition(kA);
    REQUIRE(a->sync(prompt, cancel, &reused).ok());
    CHECK(reused == 0);

    auto b = e->new_session(64);
    b->set_cache_partition(kB);
    REQUIRE(b->sync(prompt, cancel, &reused).ok());
    CHECK(reused == 0);  // A's state is there, and not B's
    CHECK(same_bits(b->logits(), cold));
    REQUIRE(b->sync(prompt, cancel, &reused).ok());
    CHECK(reused == int(prompt.size()));

    // One session moved to another partition drops its live state: what it held is not served.
    auto s = e->new_session(64);
    s->set_cache_partition(kA);
    REQUIRE(s->sync(prompt, cancel, &reused).ok());
    CHECK(reused == int(prompt.size()));  // A's from the cache
    s->set_cache_partition(kC);
    CHECK(s->tokens().empty());
    REQUIRE(s->sync(prompt, cancel, &reused).ok());
    CHECK(reused == 0);
    CHECK(same_bits(s->logits(), cold));
    // The same partition again keeps the live state.
    s->set_cache_partition(kC);
    CHECK(s->tokens().size() == prompt.size());

    // The default partition (0) is a partition like the others.
    auto d = e->new_session(64);
    REQUIRE(d->sync(prompt, cancel, &reused).ok());
    CHECK(reused == 0);
    CHECK(same_bits(d->logits(), cold));
}
