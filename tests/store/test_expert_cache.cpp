// The expert cache's policy and bookkeeping: beats LRU on a flat cyclic walk, keeps hot experts
// on a skewed one, never hands out a slot being read, never evicts one in use.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <set>

#include "store/expert_cache.h"

using namespace k3::io;
using SlotState = ExpertCache::SlotState;

namespace {

// Replays `trace` through a cache of `slots` slots; returns the fraction served without a read.
double hit_rate(const std::vector<int64_t>& trace, int slots, int64_t keys, ExpertCache::Policy policy) {
    ExpertCache cache(slots, keys, policy);
    static const uint8_t dummy = 0;
    int64_t hits = 0;
    for (int64_t key : trace) {
        cache.touch(key);
        if (cache.find(key) >= 0) {
            ++hits;
            continue;
        }
        int s = cache.reserve(key);
        REQUIRE(s >= 0);
        cache.publish(s, &dummy);
    }
    return double(hits) / double(trace.size());
}

}  // namespace

TEST_CASE("on a flat cyclic walk longer than the cache, the policy beats LRU (which gets nothing)") {
    for (auto [keys, slots] : {std::pair<int64_t, int>{150, 100}, {256, 100}, {4096, 1000}}) {
        CAPTURE(keys);
        std::vector<int64_t> trace;
        for (int round = 0; round < 10; ++round)
            for (int64_t k = 0; k < keys; ++k) trace.push_back(k);
        double lru = hit_rate(trace, slots, keys, ExpertCache::Policy::Lru);
        double ours = hit_rate(trace, slots, keys, ExpertCache::Policy::AgedLfu);
        double optimum = double(slots) / double(keys);
        MESSAGE("keys " << keys << " slots " << slots << ": LRU " << lru << ", aged LFU " << ours << ", optimum " << optimum);
        CHECK(lru == 0.0);
        CHECK(ours > 0.75 * optimum);
    }
}

TEST_CASE("on a skewed MoE-like trace it keeps the hot experts at least as well as LRU") {
    // 8 layers x 64 experts, top-8 per layer, experts drawn with weight 1/(rank+1).
    std::mt19937 rng(42);
    std::vector<double> w(64);
    for (int i = 0; i < 64; ++i) w[size_t(i)] = 1.0 / (i + 1);
    std::discrete_distribution<int> pick(w.begin(), w.end());
    std::vector<int64_t> trace;
    for (int token = 0; token < 300; ++token)
        for (int layer = 0; layer < 8; ++layer) {
            std::set<int> chosen;
            while (chosen.size() < 8) chosen.insert(pick(rng));
            for (int e : chosen) trace.push_back(layer * 64 + e);
        }
    double lru = hit_rate(trace, 100, 512, ExpertCache::Policy::Lru);
    double ours = hit_rate(trace, 100, 512, ExpertCache::Policy::AgedLfu);
    MESSAGE("skewed: LRU " << lru << ", aged LFU " << ours);
    CHECK(ours > lru);
}

TEST_CASE("slots being read or in use are never handed out or evicted") {
    static const uint8_t dummy = 0;
    ExpertCache cache(3, 100);
    int a = cache.reserve(1), b = cache.reserve(2), c = cache.reserve(3);
    CHECK(std::set<int>{a, b, c}.size() == 3);
    CHECK(cache.slot(a).state == SlotState::Reading);
    // Everything is being read: nothing to give.
    CHECK(cache.reserve(4) == -1);

    cache.publish(a, &dummy);
    cache.publish(b, &dummy);
    cache.add_user(a);
    cache.add_user(b);
    // a and b in use, c still reading: still nothing to give.
    CHECK(cache.reserve(4) == -1);
    CHECK(cache.find(1) == a);

    cache.drop_user(b);
    int d = cache.reserve(4);
    CHECK(d == b);  // the only Ready slot without users
    CHECK(cache.find(2) == -1);
    CHECK(cache.find(4) == d);
    CHECK(cache.evictions() == 1);

    // A failed read frees the slot (once its users are gone), and the key is gone.
    cache.add_user(c);
    cache.fail(c);
    CHECK(cache.find(3) == -1);
    CHECK(cache.reserve(5) == -1);  // c still has a user, d reading, a in use
    cache.drop_user(c);
    CHECK(cache.reserve(5) == c);
}

TEST_CASE("the current layer's experts survive a full cache of newer requests while in use") {
    static const uint8_t dummy = 0;
    ExpertCache cache(20, 1000);
    std::vector<int> in_use;
    for (int k = 0; k < 16; ++k) {
        cache.touch(k);
        int s = cache.reserve(k);
        cache.publish(s, &dummy);
        cache.add_user(s);
        in_use.push_back(s);
    }
    // Many later requests (hotter, even) cycle through the 4 remaining slots only.
    for (int round = 0; round < 5; ++round)
        for (int k = 100; k < 140; ++k) {
            cache.touch(k);
            if (cache.find(k) >= 0) continue;
            int s = cache.reserve(k);
            REQUIRE(s >= 0);
            CHECK(std::find(in_use.begin(), in_use.end(), s) == in_use.end());
            cache.publish(s, &dummy);
        }
    for (int k = 0; k < 16; ++k) CHECK(cache.find(k) == in_use[size_t(k)]);
}
