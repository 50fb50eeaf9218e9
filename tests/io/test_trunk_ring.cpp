// The trunk ring: exact layers through several walks (wrap-around), never overwriting the layer
// in use, read-ahead in walk order, failures handed to the acquirer and retried.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "store/trunk_ring.h"

using namespace k3;
using namespace k3::io;

namespace {

constexpr size_t kRun = 4096 * 3;

// A fake layer: every byte is the layer index plus a per-position offset.
void fill_layer(int il, uint8_t* p) {
    for (size_t i = 0; i < kRun; ++i) p[i] = uint8_t(il * 31 + i % 251);
}
bool is_layer(int il, const uint8_t* p) {
    for (size_t i = 0; i < kRun; ++i)
        if (p[i] != uint8_t(il * 31 + i % 251)) return false;
    return true;
}

}  // namespace

TEST_CASE("layers come back exact over several walks, pinned layers skipped") {
    // 7 layers, 2 and 5 pinned (not streamed), ring of 2 and of 3 slots.
    for (int slots : {2, 3}) {
        CAPTURE(slots);
        std::vector<char> streamed = {1, 1, 0, 1, 1, 0, 1};
        std::atomic<int> reads{0};
        std::vector<int> read_order;
        std::mutex order_mu;
        TrunkRing ring(streamed, slots, kRun, [&](int il, uint8_t* buf, size_t cap, const uint8_t** payload) {
            REQUIRE(cap >= kRun);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            fill_layer(il, buf);
            *payload = buf;
            ++reads;
            std::lock_guard lock(order_mu);
            read_order.push_back(il);
            return Status::Ok();
        });
        for (int token = 0; token < 4; ++token)
            for (int il = 0; il < 7; ++il) {
                if (!streamed[il]) continue;
                const uint8_t* run = nullptr;
                REQUIRE(ring.acquire(il, &run).ok());
                // Give the reader time to do anything it would (it must not touch this slot).
                std::this_thread::sleep_for(std::chrono::milliseconds(3));
                CHECK(is_layer(il, run));
                ring.release(il);
            }
        // Every streamed layer read once per walk (read-ahead may have started the 5th walk).
        CHECK(reads >= 4 * 5);
        CHECK(reads <= 4 * 5 + slots);
        // Read in walk order, wrapping around.
        const int walk[] = {0, 1, 3, 4, 6};
        for (size_t i = 0; i < read_order.size(); ++i) CHECK(read_order[i] == walk[i % 5]);
    }
}

TEST_CASE("the slot in use is never overwritten, even when the walk jumps") {
    std::vector<char> streamed(6, 1);
    TrunkRing ring(streamed, 2, kRun, [&](int il, uint8_t* buf, size_t, const uint8_t** payload) {
        fill_layer(il, buf);
        *payload = buf;
        return Status::Ok();
    });
    const uint8_t* held = nullptr;
    REQUIRE(ring.acquire(3, &held).ok());
    // Jump back to the start while still holding layer 3 (a new sequence mid-walk): the other
    // slot serves the new walk; the held one stays layer 3.
    for (int il = 0; il < 6; ++il) {
        if (il == 3) continue;
        const uint8_t* run = nullptr;
        REQUIRE(ring.acquire(il, &run).ok());
        CHECK(is_layer(il, run));
        CHECK(is_layer(3, held));
        ring.release(il);
    }
    CHECK(is_layer(3, held));
    // Holding every slot and asking for another layer is a clear error, not a deadlock.
    const uint8_t* second = nullptr;
    REQUIRE(ring.acquire(4, &second).ok());
    const uint8_t* third = nullptr;
    Status s = ring.acquire(5, &third);
    CHECK(s.code == StatusCode::Internal);
    ring.release(4);
    ring.release(3);
}

TEST_CASE("a failed read is returned to the acquirer and the next acquire reads again") {
    std::vector<char> streamed(4, 1);
    std::atomic<int> fail_layer2{1};
    TrunkRing ring(streamed, 2, kRun, [&](int il, uint8_t* buf, size_t, const uint8_t** payload) {
        if (il == 2 && fail_layer2.exchange(0))
            return Status{StatusCode::IoError, "read failed: shard.safetensors at offset 4096 (12288 bytes): EIO"};
        fill_layer(il, buf);
        *payload = buf;
        return Status::Ok();
    });
    const uint8_t* run = nullptr;
    for (int il = 0; il < 2; ++il) {
        REQUIRE(ring.acquire(il, &run).ok());
        ring.release(il);
    }
    Status s = ring.acquire(2, &run);
    CHECK(s.code == StatusCode::IoError);
    CHECK(s.message.find("offset 4096") != std::string::npos);
    REQUIRE(ring.acquire(2, &run).ok());
    CHECK(is_layer(2, run));
    ring.release(2);
}
