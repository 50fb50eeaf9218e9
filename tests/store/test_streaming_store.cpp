// The streaming store over hand-made shard files: exact bytes for every layer and expert at
// every budget (resident down to the smallest ring and cache), counters that add up, and
// faults (I/O errors, a shard truncated after start-up) turned into IoError statuses that name
// the file and offset, never into wrong bytes.
#include <doctest/doctest.h>

#include <cerrno>
#include <random>
#include <set>

#include "io/file.h"
#include "store/streaming_store.h"
#include "io/io_test_util.h"
#include "k3/error.h"

using namespace k3;
using namespace k3::io;
using k3::test::matches_pattern;
using k3::test::scratch_dir;
using k3::test::write_pattern_file;

namespace {

constexpr int kLayers = 5, kExperts = 12, kTopK = 3;
constexpr int64_t kExpertBytes = 5007;

// Two shards; layer il's trunk run then its experts, at odd offsets, as in a real checkpoint.
struct Fixture {
    std::filesystem::path dir;
    StreamingLayout layout;
    int64_t shard_size[2] = {0, 0};

    explicit Fixture(const std::string& name) {
        dir = scratch_dir(name);
        layout.files = {dir / "model-00001-of-00002.safetensors", dir / "model-00002-of-00002.safetensors"};
        layout.n_layers = kLayers;
        layout.n_experts = kExperts;
        layout.experts_per_token = kTopK;
        layout.expert_runs.resize(size_t(kLayers) * kExperts);
        int64_t at[2] = {123, 4567};
        for (int il = 0; il < kLayers; ++il) {
            int shard = il < 3 ? 0 : 1;
            int64_t n = 20000 + il * 3001 + (il == 0 ? 30000 : 0);  // layer 0 (dense) is the biggest
            layout.layer_runs.push_back(ByteRun{shard, at[shard], n});
            at[shard] += n;
            if (il == 0) continue;  // dense layer: no experts
            for (int ie = 0; ie < kExperts; ++ie) {
                ExpertRun& e = layout.expert_runs[size_t(il) * kExperts + ie];
                e.shard = shard;
                e.offset = at[shard];
                e.nbytes = kExpertBytes;
                at[shard] += kExpertBytes;
            }
        }
        for (int s = 0; s < 2; ++s) {
            shard_size[s] = at[s] + 99;
            write_pattern_file(layout.files[size_t(s)], shard_size[s]);
        }
    }

    ModelFootprint footprint() const {
        ModelFootprint f;
        for (const auto& r : layout.layer_runs) f.layer_alloc_bytes.push_back(int64_t(window_capacity(r.nbytes)));
        f.expert_slot_bytes = int64_t(window_capacity(kExpertBytes));
        f.routed_experts = int64_t(kLayers - 1) * kExperts;
        f.experts_per_token = kTopK;
        return f;
    }

    MemoryPlan plan(int64_t trunk_bytes, int cache_slots) const {
        MemoryOptions o;
        o.trunk_gb = double(trunk_bytes) / kGB;
        o.cache_gb = double(int64_t(cache_slots) * int64_t(window_capacity(kExpertBytes))) / kGB;
        return make_memory_plan(footprint(), o, int64_t(64) << 30);
    }
};

// The expert choices of a fake router: the same sequence for every budget.
std::vector<std::vector<int32_t>> routing(int tokens, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::vector<int32_t>> r;
    for (int t = 0; t < tokens * kLayers; ++t) {
        std::set<int32_t> chosen;
        while (chosen.size() < kTopK) chosen.insert(int32_t(rng() % kExperts));
        r.emplace_back(chosen.begin(), chosen.end());
    }
    return r;
}

// Walks `tokens` forward passes, checking every byte handed out.
void walk(WeightStore& store, const StreamingLayout& layout, int tokens, bool prefetch) {
    auto route = routing(tokens, 11);
    for (int t = 0; t < tokens; ++t)
        for (int il = 0; il < kLayers; ++il) {
            const uint8_t* run = nullptr;
            REQUIRE(store.acquire_layer(il, &run).ok());
            const ByteRun& lr = layout.layer_runs[il];
            REQUIRE(matches_pattern(run, lr.offset, lr.nbytes));
            if (il > 0) {
                const auto& chosen = route[size_t(t * kLayers + il)];
                if (prefetch && il + 1 < kLayers) store.prefetch_experts(il + 1, route[size_t(t * kLayers + il + 1)]);
                const uint8_t* out[kTopK] = {};
                Status s = store.acquire_experts(il, chosen, out);
                REQUIRE(s.ok());
                for (int j = 0; j < kTopK; ++j) {
                    const ExpertRun& e = layout.expert_runs[size_t(il) * kExperts + chosen[size_t(j)]];
                    REQUIRE(matches_pattern(out[j], e.offset, e.nbytes));
                }
                store.release_experts(il);
            }
            store.release_layer(il);
        }
}

struct HookGuard {
    explicit HookGuard(PreadFn fn) { set_pread_hook_for_tests(fn); }
    ~HookGuard() { set_pread_hook_for_tests(nullptr); }
};
ssize_t always_eio(int, void*, size_t, off_t) {
    errno = EIO;
    return -1;
}

}  // namespace

TEST_CASE("every byte is exact at every budget, from resident to the smallest ring and cache") {
    Fixture fx("store-budgets");
    auto fp = fx.footprint();
    int64_t trunk_all = 0;
    for (auto b : fp.layer_alloc_bytes) trunk_all += b;
    const int pool = (kLayers - 1) * kExperts;
    struct Budget {
        const char* name;
        int64_t trunk;
        int slots;
    };
    const Budget budgets[] = {
        {"resident", trunk_all, pool},
        {"ring + pins, half cache", 2 * fp.layer_alloc_bytes[0] + fp.layer_alloc_bytes[1], pool / 2},
        {"ring only, smallest cache", 2 * fp.layer_alloc_bytes[0], kTopK + 1},
        {"a ring of one layer, smallest cache", smallest_trunk_budget(fp.layer_alloc_bytes), kTopK + 1},
        {"trunk resident, smallest cache", trunk_all, kTopK + 1},
    };
    for (const auto& b : budgets) {
        CAPTURE(std::string(b.name));
        for (bool prefetch : {false, true}) {
            CAPTURE(prefetch);
            MemoryPlan plan = fx.plan(b.trunk, b.slots);
            auto store = make_streaming_store(fx.layout, plan);
            walk(*store, fx.layout, 4, prefetch);
            WeightStoreStats st = store->stats();
            CHECK(st.expert_requests == uint64_t(4 * (kLayers - 1) * kTopK));
            CHECK(st.expert_read_failures == 0);
            CHECK(st.pinned_layers == plan.trunk.n_pinned);
            CHECK(st.ring_bytes == plan.trunk.ring_bytes);
            // Served from memory + read = requested (a prefetch hit was read by the prefetch).
            uint64_t reads = st.expert_bytes_read / uint64_t(kExpertBytes);
            CHECK(st.expert_hits + reads >= st.expert_requests);
            if (b.slots == pool) CHECK(st.expert_evictions == 0);
            if (b.slots == kTopK + 1) CHECK(st.expert_evictions > 0);
            if (plan.trunk.n_pinned == kLayers) {
                CHECK(st.trunk_layer_reads == uint64_t(kLayers));  // pinned: read once
            } else {
                CHECK(st.trunk_layer_reads > uint64_t(kLayers));
            }
        }
    }
}

TEST_CASE("an I/O error on an expert read is an IoError naming file and offset, with no pointer") {
    Fixture fx("store-eio");
    auto store = make_streaming_store(fx.layout, fx.plan(1 << 30, 20));
    const uint8_t* run = nullptr;
    REQUIRE(store->acquire_layer(1, &run).ok());
    const int32_t chosen[kTopK] = {0, 5, 7};
    const uint8_t* out[kTopK] = {};
    {
        HookGuard hook(always_eio);
        Status s = store->acquire_experts(1, chosen, out);
        CHECK(s.code == StatusCode::IoError);
        CHECK(s.message.find("model-00001-of-00002.safetensors") != std::string::npos);
        const ExpertRun& e0 = fx.layout.expert_runs[size_t(1) * kExperts + 0];
        CHECK(s.message.find("at offset " + std::to_string(align_down(e0.offset, 4096))) != std::string::npos);
        for (auto* p : out) CHECK(p == nullptr);
    }
    CHECK(store->stats().expert_read_failures == 1);
    // The failure left nothing behind: the same request now succeeds with the right bytes.
    REQUIRE(store->acquire_experts(1, chosen, out).ok());
    for (int j = 0; j < kTopK; ++j) {
        const ExpertRun& e = fx.layout.expert_runs[size_t(1) * kExperts + chosen[j]];
        CHECK(matches_pattern(out[j], e.offset, e.nbytes));
    }
    store->release_experts(1);
    store->release_layer(1);
}

TEST_CASE("a shard truncated after start-up fails the reads that need the lost bytes") {
    Fixture fx("store-truncated");
    auto store = make_streaming_store(fx.layout, fx.plan(2 * fx.footprint().layer_alloc_bytes[0], kTopK + 1));
    walk(*store, fx.layout, 1, false);
    // Cut the second shard in the middle of layer 4's trunk run.
    const ByteRun& l4 = fx.layout.layer_runs[4];
    std::filesystem::resize_file(fx.layout.files[1], uint64_t(l4.offset + l4.nbytes / 2));

    const uint8_t* run = nullptr;
    REQUIRE(store->acquire_layer(0, &run).ok());  // shard 1 is intact
    store->release_layer(0);
    // Layer 3 starts before the cut and its experts lie before it too: fine.
    REQUIRE(store->acquire_layer(3, &run).ok());
    store->release_layer(3);
    Status s = store->acquire_layer(4, &run);
    CHECK(s.code == StatusCode::IoError);
    CHECK(s.message.find("model-00002-of-00002.safetensors") != std::string::npos);
    CHECK(s.message.find("short read") != std::string::npos);
    // Layer 4's experts lie after the cut.
    const int32_t chosen[kTopK] = {1, 2, 3};
    const uint8_t* out[kTopK] = {};
    Status e = store->acquire_experts(4, chosen, out);
    CHECK(e.code == StatusCode::IoError);
    CHECK(e.message.find("model-00002-of-00002.safetensors") != std::string::npos);
    CHECK(store->stats().expert_read_failures == 1);
}

TEST_CASE("prefetched experts are served without another read and counted apart from retention") {
    Fixture fx("store-prefetch");
    // Prefetch needs room for 2 x top-k + 8 slots.
    auto store = make_streaming_store(fx.layout, fx.plan(1 << 30, 2 * kTopK + 8));
    const int32_t next[kTopK] = {2, 4, 9};
    store->prefetch_experts(2, next);
    const uint8_t* out[kTopK] = {};
    REQUIRE(store->acquire_experts(2, next, out).ok());
    for (int j = 0; j < kTopK; ++j) {
        const ExpertRun& e = fx.layout.expert_runs[size_t(2) * kExperts + next[j]];
        CHECK(matches_pattern(out[j], e.offset, e.nbytes));
    }
    store->release_experts(2);
    WeightStoreStats st = store->stats();
    CHECK(st.expert_prefetch_reads == 3);
    CHECK(st.expert_prefetch_hits == 3);
    CHECK(st.expert_hits == 0);  // read for this request, even if early: not retention
    CHECK(st.expert_bytes_read == uint64_t(3 * kExpertBytes));
    // Asked again: now it is retention.
    REQUIRE(store->acquire_experts(2, next, out).ok());
    store->release_experts(2);
    CHECK(store->stats().expert_hits == 3);
    CHECK(store->stats().expert_bytes_read == uint64_t(3 * kExpertBytes));
}
