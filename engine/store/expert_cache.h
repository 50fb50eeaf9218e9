// The expert cache's bookkeeping: which expert sits in which slot, which slots are being read,
// which are in use by the current layer, and which one to give up when a new expert needs a
// slot. No I/O and no locking here (the streaming store does both), so the policy can be tested
// on its own.
//
// Replacement is an aged LFU with newest-first tie breaking: every key (layer, expert) keeps a
// small saturating request count that is halved every 8 x slots requests, and the victim is the
// resident expert with the lowest count, the most recently admitted one among equals. On a flat
// cyclic walk longer than the cache (every expert equally hot, as K3's balanced router makes
// them) LRU always evicts exactly the expert needed next and never hits; this policy keeps a
// stable set and hits it once per cycle, close to the slots/keys optimum. On a skewed
// workload it keeps the hot experts. Plain LRU stays available for comparison (tests, bench).
#pragma once
#include <cstdint>
#include <vector>

namespace k3::io {

class ExpertCache {
public:
    enum class Policy { AgedLfu, Lru };
    enum class SlotState : uint8_t { Empty, Reading, Ready };

    struct Slot {
        int64_t key = -1;
        SlotState state = SlotState::Empty;
        int users = 0;              // acquisitions not yet released: never evicted while > 0
        bool prefetched = false;    // read by a prefetch and not requested since
        uint64_t admitted = 0;      // admission order
        uint64_t last_use = 0;      // for LRU
        const uint8_t* payload = nullptr;
    };

    ExpertCache(int n_slots, int64_t n_keys, Policy policy = Policy::AgedLfu);

    int n_slots() const { return int(slots_.size()); }
    const Slot& slot(int s) const { return slots_[s]; }
    Slot& slot(int s) { return slots_[s]; }

    // Records one request for `key` (feeds the policy).
    void touch(int64_t key);
    // The slot holding or reading `key`, or -1.
    int find(int64_t key) const { return key_slot_[key]; }
    // A slot for `key` (not resident): an empty one, else the policy's victim among Ready slots
    // with no users. The slot is left Reading. Returns -1 when every slot is in use or being read.
    int reserve(int64_t key);
    // Reading -> Ready with its payload, or Reading -> Empty after a failed read.
    void publish(int s, const uint8_t* payload);
    void fail(int s);
    // In-use marks: a slot with users is never evicted (and a failed one is freed at the last drop).
    void add_user(int s) { slots_[s].users++; }
    void drop_user(int s);

    uint64_t evictions() const { return evictions_; }
    // Takes up to n slots out of service (a prefill pass borrows their memory: docs/performance.md,
    // "Prefill passes"): empty ones first, then the policy's victims among Ready slots with no
    // users (their experts leave the cache); never a slot in use or being read. Returns them.
    std::vector<int> lend(int n);
    // Puts the lent slots back in service, empty.
    void take_back();
    int lent() const { return int(lent_.size()); }

private:
    int pick_victim() const;
    int take_slot();

    Policy policy_;
    std::vector<Slot> slots_;
    std::vector<int32_t> key_slot_;     // [n_keys] -> slot or -1
    std::vector<uint8_t> count_;        // [n_keys] saturating request counts (aged LFU)
    std::vector<int> free_;             // empty slots
    std::vector<int> lent_;             // slots out of service (lend)
    uint64_t clock_ = 0;                // requests seen
    uint64_t admissions_ = 0;
    uint64_t evictions_ = 0;
    uint64_t aging_period_;
};

}  // namespace k3::io
