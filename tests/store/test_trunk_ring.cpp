// The trunk ring (a byte budget): exact layers through several walks (wrap-around), read-ahead
// that fills the free space in walk order, layers larger than half the ring, a ring that holds
// one layer (no read while it is in use), never overwriting a layer in use or read ahead and not
// yet consumed, failures handed to the acquirer and retried. Fake reads with counters; the tests
// wait for the reader with wait_idle(), never for a time.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "store/ring_schedule.h"
#include "store/trunk_ring.h"

using namespace k3;
using namespace k3::io;

namespace {

constexpr int64_t kUnit = 4096 * 3;

// A fake layer: every byte is the layer index plus a per-position offset.
void fill_layer(int il, uint8_t* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) p[i] = uint8_t(il * 31 + i % 251);
}
bool is_layer(int il, const uint8_t* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        if (p[i] != uint8_t(il * 31 + i % 251)) return false;
    return true;
}

std::vector<int64_t> units(std::initializer_list<int> sizes) {
    std::vector<int64_t> out;
    for (int s : sizes) out.push_back(s * kUnit);
    return out;
}

// A ring over fake layers that counts reads, remembers their order, and records whether a read
// started while the test held a layer.
struct FakeTrunk {
    std::vector<int64_t> bytes;
    std::atomic<int> reads{0};
    std::atomic<int> held{0};
    std::atomic<int> reads_while_held{0};
    std::mutex mu;
    std::vector<int> order;
    std::atomic<int> fail_layer{-1};

    TrunkRing::ReadLayer reader() {
        return [this](int il, uint8_t* buf, size_t cap, const uint8_t** payload) {
            REQUIRE(int64_t(cap) >= bytes[size_t(il)]);
            if (held > 0) ++reads_while_held;
            int failing = il;
            if (fail_layer.compare_exchange_strong(failing, -1))
                return Status{StatusCode::IoError, "read failed: shard.safetensors at offset 4096 (12288 bytes): EIO"};
            fill_layer(il, buf, bytes[size_t(il)]);
            *payload = buf;
            ++reads;
            std::lock_guard lock(mu);
            order.push_back(il);
            return Status::Ok();
        };
    }
};

// Every layer the ring shows (peek) is exact and no two of them share a byte. Waits for the
// reader first: while it works, a layer seen by one peek may be replaced before the next.
void check_live_layers(TrunkRing& ring, const FakeTrunk& t) {
    ring.wait_idle();
    std::vector<std::pair<const uint8_t*, int64_t>> live;
    for (int il = 0; il < int(t.bytes.size()); ++il)
        if (const uint8_t* p = ring.peek(il)) {
            CHECK(is_layer(il, p, t.bytes[size_t(il)]));
            live.push_back({p, t.bytes[size_t(il)]});
        }
    for (size_t a = 0; a < live.size(); ++a)
        for (size_t b = a + 1; b < live.size(); ++b)
            CHECK((live[a].first + live[a].second <= live[b].first || live[b].first + live[b].second <= live[a].first));
}

}  // namespace

TEST_CASE("layers come back exact over several walks, pinned layers skipped") {
    // 7 layers, 2 and 5 pinned (not streamed), a ring of 2 and of 3 layers.
    for (int ring_units : {2, 3}) {
        CAPTURE(ring_units);
        FakeTrunk t;
        t.bytes = units({1, 1, 1, 1, 1, 1, 1});
        std::vector<char> streamed = {1, 1, 0, 1, 1, 0, 1};
        TrunkRing ring(streamed, t.bytes, ring_units * kUnit, t.reader());
        for (int token = 0; token < 4; ++token)
            for (int il = 0; il < 7; ++il) {
                if (!streamed[il]) continue;
                const uint8_t* run = nullptr;
                REQUIRE(ring.acquire(il, &run).ok());
                ring.wait_idle();  // the reader did all it would; it must not touch this layer
                CHECK(is_layer(il, run, kUnit));
                check_live_layers(ring, t);
                ring.release(il);
            }
        // Every streamed layer read once per walk (read-ahead may have started the 5th walk).
        CHECK(t.reads >= 4 * 5);
        CHECK(t.reads <= 4 * 5 + ring_units);
        // Read in walk order, wrapping around (the reader may still be reading ahead: copy under
        // its lock).
        std::vector<int> order;
        {
            std::lock_guard lock(t.mu);
            order = t.order;
        }
        const int walk[] = {0, 1, 3, 4, 6};
        for (size_t i = 0; i < order.size(); ++i) CHECK(order[i] == walk[i % 5]);
    }
}

TEST_CASE("read-ahead fills the free space in walk order and wraps around the walk") {
    FakeTrunk t;
    t.bytes = units({2, 1, 1, 1, 2, 1});
    TrunkRing ring(std::vector<char>(6, 1), t.bytes, 4 * kUnit, t.reader());
    const uint8_t* run = nullptr;
    REQUIRE(ring.acquire(0, &run).ok());
    ring.wait_idle();
    // Layer 0 (2 units) in use: layers 1 and 2 fill the other 2 units; 3 does not fit.
    CHECK(ring.peek(1) != nullptr);
    CHECK(ring.peek(2) != nullptr);
    CHECK(ring.peek(3) == nullptr);
    CHECK(t.reads == 3);
    check_live_layers(ring, t);
    ring.release(0);
    ring.wait_idle();
    CHECK(ring.peek(3) != nullptr);  // layer 0's bytes were free for it
    CHECK(t.reads == 4);
    // Walk on to layer 5: the window wraps to layer 0 of the next token (1 + 2 units).
    for (int il = 1; il <= 5; ++il) {
        REQUIRE(ring.acquire(il, &run).ok());
        CHECK(is_layer(il, run, t.bytes[size_t(il)]));
        ring.release(il);
    }
    REQUIRE(ring.acquire(0, &run).ok());
    ring.wait_idle();
    CHECK(is_layer(0, run, 2 * kUnit));
    CHECK(ring.peek(1) != nullptr);  // the next token's walk is read ahead too
    check_live_layers(ring, t);
    ring.release(0);
    std::lock_guard lock(t.mu);
    const std::vector<int> expected = {0, 1, 2, 3, 4, 5, 0, 1};
    REQUIRE(t.order.size() >= expected.size());
    for (size_t i = 0; i < expected.size(); ++i) CHECK(t.order[i] == expected[i]);
}

TEST_CASE("a layer larger than half the ring is read only where nothing in use or unconsumed lies") {
    FakeTrunk t;
    t.bytes = units({3, 1, 1, 1});
    TrunkRing ring(std::vector<char>(4, 1), t.bytes, 4 * kUnit, t.reader());
    for (int token = 0; token < 3; ++token)
        for (int il = 0; il < 4; ++il) {
            const uint8_t* run = nullptr;
            REQUIRE(ring.acquire(il, &run).ok());
            t.held = 1;
            ring.wait_idle();
            CHECK(is_layer(il, run, t.bytes[size_t(il)]));
            check_live_layers(ring, t);
            t.held = 0;
            ring.release(il);
        }
    // (a consumed layer still in the ring is used again without a read, so fewer than 12)
    CHECK(t.reads >= 4);
}

TEST_CASE("a ring that holds one layer reads nothing while that layer is in use") {
    // Spec item 15: with room for one layer, no reader may overwrite the layer being computed.
    for (bool mixed : {false, true}) {
        CAPTURE(mixed);
        FakeTrunk t;
        t.bytes = mixed ? units({2, 2, 1, 2}) : units({1, 1, 1, 1});
        const int64_t largest = mixed ? 2 * kUnit : kUnit;
        TrunkRing ring(std::vector<char>(4, 1), t.bytes, largest + 4096 /* less than one more layer */, t.reader());
        for (int token = 0; token < 3; ++token)
            for (int il = 0; il < 4; ++il) {
                const uint8_t* run = nullptr;
                REQUIRE(ring.acquire(il, &run).ok());
                t.held = 1;
                ring.wait_idle();
                CHECK(is_layer(il, run, t.bytes[size_t(il)]));
                t.held = 0;
                ring.release(il);
            }
        CHECK(t.reads_while_held == 0);
        CHECK(t.reads >= 12);
        CHECK(t.reads <= 13);  // each layer once a walk, plus the next token's first
    }
}

TEST_CASE("a read-ahead layer not yet consumed is never overwritten; the one in use survives a jump") {
    FakeTrunk t;
    t.bytes = units({1, 1, 1, 1, 1, 1});
    TrunkRing ring(std::vector<char>(6, 1), t.bytes, 3 * kUnit, t.reader());
    const uint8_t* held = nullptr;
    REQUIRE(ring.acquire(0, &held).ok());
    ring.wait_idle();
    const uint8_t* one = ring.peek(1);
    const uint8_t* two = ring.peek(2);
    REQUIRE(one != nullptr);
    REQUIRE(two != nullptr);
    CHECK(t.reads == 3);  // the ring is full: 0 in use, 1 and 2 read ahead
    ring.release(0);
    ring.wait_idle();
    // Layer 3 took layer 0's bytes, not those of 1 or 2, which are not consumed yet.
    CHECK(ring.peek(1) == one);
    CHECK(ring.peek(2) == two);
    CHECK(is_layer(1, one, kUnit));
    CHECK(is_layer(2, two, kUnit));
    REQUIRE(ring.peek(3) != nullptr);
    check_live_layers(ring, t);

    // Jump while holding layer 1 (a new sequence mid-walk): the walk restarts at 0 around it.
    REQUIRE(ring.acquire(1, &held).ok());
    for (int il : {0, 2, 3, 4, 5}) {
        const uint8_t* run = nullptr;
        REQUIRE(ring.acquire(il, &run).ok());
        CHECK(is_layer(il, run, kUnit));
        CHECK(is_layer(1, held, kUnit));
        check_live_layers(ring, t);
        ring.release(il);
    }
    // Holding layers that leave no room for another is a clear error, not a deadlock.
    const uint8_t* second = nullptr;
    const uint8_t* third = nullptr;
    REQUIRE(ring.acquire(2, &second).ok());
    REQUIRE(ring.acquire(3, &third).ok());
    const uint8_t* fourth = nullptr;
    Status s = ring.acquire(4, &fourth);
    CHECK(s.code == StatusCode::Internal);
    CHECK(s.message.find("no room") != std::string::npos);
    ring.release(3);
    ring.release(2);
    ring.release(1);
}

TEST_CASE("random sizes, rings and jumps: every layer handed out is exact and no two live layers share a byte") {
    std::mt19937 rng(13);
    for (int trial = 0; trial < 20; ++trial) {
        CAPTURE(trial);
        FakeTrunk t;
        const int n = 3 + int(rng() % 8);
        std::vector<char> streamed(size_t(n), 1);
        int64_t largest = 0;
        for (int il = 0; il < n; ++il) {
            t.bytes.push_back(int64_t(1 + rng() % 4) * kUnit - int64_t(rng() % 3) * 4096);
            largest = std::max(largest, t.bytes.back());
            if (rng() % 4 == 0) streamed[size_t(il)] = 0;  // pinned
        }
        streamed[0] = 1;
        const int64_t ring_bytes = largest + int64_t(rng() % 5) * kUnit;
        TrunkRing ring(streamed, t.bytes, ring_bytes, t.reader());
        int il = 0;
        for (int step = 0; step < 60; ++step) {
            if (rng() % 10 == 0) il = int(rng() % unsigned(n));  // a jump (a new sequence mid-walk)
            if (!streamed[size_t(il)]) {
                il = (il + 1) % n;
                continue;
            }
            const uint8_t* run = nullptr;
            REQUIRE(ring.acquire(il, &run).ok());
            if (step % 3 == 0) ring.wait_idle();
            CHECK(is_layer(il, run, t.bytes[size_t(il)]));
            check_live_layers(ring, t);
            ring.release(il);
            il = (il + 1) % n;
        }
    }
}

TEST_CASE("a failed read is returned to the acquirer and the next acquire reads again") {
    FakeTrunk t;
    t.bytes = units({1, 1, 1, 1});
    t.fail_layer = 2;
    TrunkRing ring(std::vector<char>(4, 1), t.bytes, 2 * kUnit, t.reader());
    const uint8_t* run = nullptr;
    for (int il = 0; il < 2; ++il) {
        REQUIRE(ring.acquire(il, &run).ok());
        ring.release(il);
    }
    Status s = ring.acquire(2, &run);
    CHECK(s.code == StatusCode::IoError);
    CHECK(s.message.find("offset 4096") != std::string::npos);
    REQUIRE(ring.acquire(2, &run).ok());
    CHECK(is_layer(2, run, kUnit));
    ring.release(2);
}

TEST_CASE("the walk simulation says which reads cannot overlap compute") {
    // Two consecutive layers fit everywhere except around the 3-unit layer 0.
    const std::vector<int64_t> bytes = units({3, 1, 1, 1});
    RingWalk w = simulate_ring_walk(std::vector<char>(4, 1), bytes, 4 * kUnit);
    CHECK(w.overlapped[1]);  // 3 + 1 units fit
    CHECK(w.overlapped[2]);
    CHECK(w.overlapped[3]);
    CHECK(w.max_ahead >= 2);
    // One layer only: every read waits.
    w = simulate_ring_walk(std::vector<char>(4, 1), units({1, 1, 1, 1}), kUnit);
    CHECK(w.waiting_layers == 4);
    CHECK(w.max_ahead == 0);
    // Pinned layers between two streamed ones give the reader time: nothing waits.
    w = simulate_ring_walk({1, 0, 1, 0}, units({1, 1, 1, 1}), kUnit);
    CHECK(w.waiting_layers == 0);
}

TEST_CASE("the walk simulation says which layers stay in the ring from one walk to the next") {
    // k3-slice's shape (2.34, 1.26, 0.83 GB): the 8-unit ring holds layers 0 and 2 side by side
    // and layer 1 in layer 0's bytes, so layer 2 never gives its bytes away and is read once.
    RingWalk w = simulate_ring_walk(std::vector<char>(3, 1), units({6, 3, 2}), 8 * kUnit);
    CHECK(w.reread[0]);
    CHECK(w.reread[1]);
    CHECK_FALSE(w.reread[2]);
    CHECK(w.kept_layers == 1);
    // Only the largest layer: every layer is read again every walk.
    w = simulate_ring_walk(std::vector<char>(3, 1), units({6, 3, 2}), 6 * kUnit);
    CHECK(w.kept_layers == 0);
    for (int il = 0; il < 3; ++il) CHECK(w.reread[size_t(il)]);
    // Room for every streamed layer: none is read again; pinned layers are never "reread".
    w = simulate_ring_walk({1, 0, 1}, units({6, 3, 2}), 8 * kUnit);
    CHECK(w.kept_layers == 2);
    CHECK_FALSE(w.reread[0]);
    CHECK_FALSE(w.reread[1]);
    CHECK_FALSE(w.reread[2]);
}
