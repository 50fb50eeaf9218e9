// The trunk's read ring: the layers that are not pinned stream through one byte arena, read ahead
// by a background thread in the order the forward pass walks them (0, 1, ..., n-1, then 0 again
// for the next token). A layer takes its own size, not a slot sized for the largest: the reader
// reads as many of the following streamed layers as fit in the free space, and a ring that holds
// only the largest layer still works, one layer at a time. Where layers go and what is read next
// is RingSchedule's (ring_schedule.h, with the rules that keep it exact); this class adds the
// thread, the arena and the hand-over:
//  - a layer being read, in use (acquired, not released), or read ahead and not yet consumed is
//    never overwritten (one read ahead may give way to a layer needed before it after the walk
//    jumps back);
//  - a layer is published only after its read completed in full; a failed read is handed to
//    the acquirer as its Status and its space freed for a retry;
//  - with room for one layer, nothing is read while that layer is in use.
// Pinned layers are not the ring's business: the store keeps those.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "io/file.h"
#include "store/ring_schedule.h"

namespace k3::io {

class TrunkRing {
public:
    // Reads layer il into buf (cap bytes); sets *payload to the run's first byte.
    using ReadLayer = std::function<Status(int il, uint8_t* buf, size_t cap, const uint8_t** payload)>;

    // `streamed[il]` marks the layers that go through the ring, `layer_bytes[il]` the buffer each
    // needs (its read window). Allocates `ring_bytes`, which must hold the largest streamed layer.
    TrunkRing(std::vector<char> streamed, std::span<const int64_t> layer_bytes, int64_t ring_bytes, ReadLayer read);
    ~TrunkRing();
    TrunkRing(const TrunkRing&) = delete;
    TrunkRing& operator=(const TrunkRing&) = delete;

    // Blocks until layer il is in the ring; *run is valid until release(il). Moves the walk's
    // cursor to il. An IoError from the read is returned as is (no pointer handed out).
    Status acquire(int il, const uint8_t** run);
    void release(int il);
    // Layer il's run if its read has completed (Ready or in use), else nullptr; never waits.
    // A layer inside the read-ahead window is not evicted before it is acquired and released.
    const uint8_t* peek(int il) const;

    int64_t ring_bytes() const { return int64_t(arena_.size()); }
    uint64_t layer_reads() const;
    double wait_seconds() const;
    // Blocks until the reader has no read to start (read-ahead is as far as space allows);
    // for tests.
    void wait_idle();

private:
    void reader_loop();

    mutable std::mutex mu_;
    std::condition_variable cv_;
    RingSchedule schedule_;                  // guarded by mu_
    AlignedBuffer arena_;
    std::vector<const uint8_t*> payload_;    // [n_layers]: while Ready or InUse
    std::vector<Status> failure_;            // [n_layers]: while Failed
    ReadLayer read_;
    int cursor_ = 0;
    bool reading_ = false;
    bool stopping_ = false;
    uint64_t layer_reads_ = 0;
    double wait_seconds_ = 0;
    std::thread reader_;
};

}  // namespace k3::io
