// The trunk's read ring: the layers that are not pinned stream through a few uniform slots, read
// ahead by a background thread in the order the forward pass walks them (0, 1, ..., n-1, then
// 0 again for the next token). Rules that keep it exact:
//  - a slot that is being read, is in use (acquired, not released), or holds a layer the walk
//    has not consumed yet (one of the next `slots` streamed layers from the cursor) is never
//    claimed for another layer;
//  - a layer is published only after its read completed in full; a failed read is handed to
//    the acquirer as its Status and the slot is freed for a retry.
// Pinned layers are not the ring's business: the store keeps those.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "io/file.h"

namespace k3::io {

class TrunkRing {
public:
    // Reads layer il into buf (cap bytes); sets *payload to the run's first byte.
    using ReadLayer = std::function<Status(int il, uint8_t* buf, size_t cap, const uint8_t** payload)>;

    // `streamed[il]` marks the layers that go through the ring. Allocates slots x slot_bytes.
    TrunkRing(std::vector<char> streamed, int slots, size_t slot_bytes, ReadLayer read);
    ~TrunkRing();
    TrunkRing(const TrunkRing&) = delete;
    TrunkRing& operator=(const TrunkRing&) = delete;

    // Blocks until layer il is in a slot; *run is valid until release(il). Moves the walk's
    // cursor to il. An IoError from the read is returned as is (no pointer handed out).
    Status acquire(int il, const uint8_t** run);
    void release(int il);
    // Layer il's run if its read has completed (Ready or in use), else nullptr; never waits.
    // A layer inside the read-ahead window is not evicted before it is acquired and released.
    const uint8_t* peek(int il) const;

    int slots() const { return int(slots_.size()); }
    uint64_t layer_reads() const;
    double wait_seconds() const;

private:
    enum class State { Empty, Reading, Ready, InUse, Failed };
    struct Slot {
        AlignedBuffer buf;
        int layer = -1;
        State state = State::Empty;
        const uint8_t* payload = nullptr;
        Status failure;
    };

    void reader_loop();
    // The next `slots` streamed layers from the cursor, in walk order (caller holds mu_).
    std::vector<int> wanted_layers() const;
    int slot_of(int il) const;
    bool pick_work(int* slot, int* layer) const;

    std::vector<char> streamed_;
    int n_layers_;
    std::vector<Slot> slots_;
    ReadLayer read_;

    mutable std::mutex mu_;
    std::condition_variable cv_;
    int cursor_ = 0;
    bool stopping_ = false;
    uint64_t layer_reads_ = 0;
    double wait_seconds_ = 0;
    std::thread reader_;
};

}  // namespace k3::io
