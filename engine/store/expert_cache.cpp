#include "store/expert_cache.h"

#include <algorithm>

#include "util/check.h"

namespace k3::io {

ExpertCache::ExpertCache(int n_slots, int64_t n_keys, Policy policy)
    : policy_(policy), slots_(size_t(n_slots)), key_slot_(size_t(n_keys), -1), count_(size_t(n_keys), 0),
      aging_period_(8 * uint64_t(std::max(n_slots, 1))) {
    for (int s = n_slots - 1; s >= 0; --s) free_.push_back(s);
}

void ExpertCache::touch(int64_t key) {
    ++clock_;
    if (count_[key] < 255) count_[key]++;
    if (clock_ % aging_period_ == 0)
        for (auto& c : count_) c >>= 1;  // aging: old popularity fades
    int s = key_slot_[key];
    if (s >= 0) slots_[s].last_use = clock_;
}

int ExpertCache::pick_victim() const {
    int best = -1;
    for (int s = 0; s < int(slots_.size()); ++s) {
        const Slot& c = slots_[s];
        if (c.state != SlotState::Ready || c.users > 0) continue;
        if (best < 0) {
            best = s;
            continue;
        }
        const Slot& b = slots_[best];
        bool better;
        if (policy_ == Policy::Lru) {
            better = c.last_use < b.last_use;
        } else {
            uint8_t cc = count_[c.key], bc = count_[b.key];
            better = cc < bc || (cc == bc && c.admitted > b.admitted);
        }
        if (better) best = s;
    }
    return best;
}

// A slot to fill: a free one, else the victim evicted from its key (-1 when every slot is in use).
int ExpertCache::take_slot() {
    if (!free_.empty()) {
        const int s = free_.back();
        free_.pop_back();
        return s;
    }
    const int s = pick_victim();
    if (s < 0) return -1;
    key_slot_[slots_[s].key] = -1;
    ++evictions_;
    return s;
}

int ExpertCache::reserve(int64_t key) {
    K3_CHECK(key_slot_[key] < 0, "expert key %lld is already in slot %d", (long long)key, key_slot_[key]);
    const int s = take_slot();
    if (s < 0) return -1;
    Slot& slot = slots_[s];
    slot.key = key;
    slot.state = SlotState::Reading;
    slot.users = 0;
    slot.prefetched = false;
    slot.payload = nullptr;
    slot.admitted = ++admissions_;
    slot.last_use = clock_;
    key_slot_[key] = s;
    return s;
}

void ExpertCache::publish(int s, const uint8_t* payload) {
    Slot& slot = slots_[s];
    K3_CHECK(slot.state == SlotState::Reading, "publishing slot %d that is not being read", s);
    slot.state = SlotState::Ready;
    slot.payload = payload;
}

void ExpertCache::fail(int s) {
    Slot& slot = slots_[s];
    K3_CHECK(slot.state == SlotState::Reading, "failing slot %d that is not being read", s);
    key_slot_[slot.key] = -1;
    slot.key = -1;
    slot.state = SlotState::Empty;
    slot.payload = nullptr;
    slot.prefetched = false;
    if (slot.users == 0) free_.push_back(s);
}

void ExpertCache::drop_user(int s) {
    Slot& slot = slots_[s];
    K3_CHECK(slot.users > 0, "slot %d released more often than acquired", s);
    if (--slot.users == 0 && slot.state == SlotState::Empty) free_.push_back(s);
}

std::vector<int> ExpertCache::lend(int n) {
    std::vector<int> taken;
    while (int(taken.size()) < n) {
        const int s = take_slot();
        if (s < 0) break;
        Slot& slot = slots_[s];
        slot.key = -1;
        slot.state = SlotState::Empty;  // out of pick_victim's reach while lent: it picks Ready slots
        slot.prefetched = false;
        slot.payload = nullptr;
        taken.push_back(s);
    }
    lent_.insert(lent_.end(), taken.begin(), taken.end());
    return taken;
}

void ExpertCache::take_back() {
    free_.insert(free_.end(), lent_.begin(), lent_.end());
    lent_.clear();
}

}  // namespace k3::io
