#include "store/trunk_ring.h"

#include <algorithm>
#include <chrono>

#include "util/check.h"

namespace k3::io {

TrunkRing::TrunkRing(std::vector<char> streamed, int slots, size_t slot_bytes, ReadLayer read)
    : streamed_(std::move(streamed)), n_layers_(int(streamed_.size())), slots_(size_t(std::max(slots, 1))),
      read_(std::move(read)) {
    for (auto& s : slots_) s.buf = AlignedBuffer(slot_bytes);
    int first = 0;
    while (first < n_layers_ && !streamed_[first]) ++first;
    cursor_ = first < n_layers_ ? first : 0;
    reader_ = std::thread([this] { reader_loop(); });
}

TrunkRing::~TrunkRing() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    reader_.join();
}

uint64_t TrunkRing::layer_reads() const {
    std::lock_guard lock(mu_);
    return layer_reads_;
}

double TrunkRing::wait_seconds() const {
    std::lock_guard lock(mu_);
    return wait_seconds_;
}

std::vector<int> TrunkRing::wanted_layers() const {
    std::vector<int> wanted;
    for (int step = 0; step < n_layers_ && int(wanted.size()) < int(slots_.size()); ++step) {
        int il = (cursor_ + step) % n_layers_;
        if (streamed_[il]) wanted.push_back(il);
    }
    return wanted;
}

int TrunkRing::slot_of(int il) const {
    for (int s = 0; s < int(slots_.size()); ++s)
        if (slots_[s].layer == il && slots_[s].state != State::Empty) return s;
    return -1;
}

// The first wanted layer that no slot holds, and a slot it may go to: one that is empty, or
// neither in use nor being read and holding a layer that is not wanted, or wanted only later in
// the walk (read-ahead that was never handed out; it is read again when its turn comes). The
// last case matters when the walk jumps back while a slot is still held: the held slot leaves
// fewer slots than the window, and the layer needed first must win.
bool TrunkRing::pick_work(int* slot, int* layer) const {
    std::vector<int> wanted = wanted_layers();
    auto rank = [&](int il) {
        auto it = std::find(wanted.begin(), wanted.end(), il);
        return it == wanted.end() ? int(wanted.size()) : int(it - wanted.begin());
    };
    for (size_t w = 0; w < wanted.size(); ++w) {
        int il = wanted[w];
        if (slot_of(il) >= 0) continue;
        int best = -1, best_rank = int(w);
        for (int s = 0; s < int(slots_.size()); ++s) {
            const Slot& c = slots_[s];
            int r = c.state == State::Empty ? int(wanted.size()) + 1
                    : (c.state == State::Ready || c.state == State::Failed) ? rank(c.layer)
                                                                             : -1;
            if (r > best_rank) {  // the slot whose layer is needed last (or never)
                best = s;
                best_rank = r;
            }
        }
        if (best < 0) return false;  // keep walk order: never read a later layer before an earlier one
        *slot = best;
        *layer = il;
        return true;
    }
    return false;
}

void TrunkRing::reader_loop() {
    std::unique_lock lock(mu_);
    for (;;) {
        int s = -1, il = -1;
        cv_.wait(lock, [&] { return stopping_ || pick_work(&s, &il); });
        if (stopping_) return;
        Slot& slot = slots_[s];
        slot.layer = il;
        slot.state = State::Reading;
        slot.payload = nullptr;
        uint8_t* buf = slot.buf.data();
        size_t cap = slot.buf.size();
        lock.unlock();
        const uint8_t* payload = nullptr;
        Status st = read_(il, buf, cap, &payload);
        lock.lock();
        ++layer_reads_;
        if (st.ok()) {
            slot.state = State::Ready;
            slot.payload = payload;
        } else {
            slot.state = State::Failed;
            slot.failure = st;
        }
        cv_.notify_all();
    }
}

Status TrunkRing::acquire(int il, const uint8_t** run) {
    K3_CHECK(il >= 0 && il < n_layers_ && streamed_[il], "layer %d does not stream through the ring", il);
    std::unique_lock lock(mu_);
    cursor_ = il;
    cv_.notify_all();
    auto t0 = std::chrono::steady_clock::now();
    bool waited = false;
    for (;;) {
        int s = slot_of(il);
        if (s >= 0 && slots_[s].state == State::Ready) {
            slots_[s].state = State::InUse;
            *run = slots_[s].payload;
            break;
        }
        if (s >= 0 && slots_[s].state == State::Failed) {
            Status failure = slots_[s].failure;
            slots_[s].state = State::Empty;  // the next acquire reads it again
            slots_[s].layer = -1;
            cv_.notify_all();
            return failure;
        }
        if (s >= 0 && slots_[s].state == State::InUse)
            return {StatusCode::Internal, "trunk layer " + std::to_string(il) + " acquired twice without release"};
        bool all_in_use = std::all_of(slots_.begin(), slots_.end(), [](const Slot& c) { return c.state == State::InUse; });
        if (all_in_use)
            return {StatusCode::Internal, "trunk ring: all " + std::to_string(slots_.size()) +
                                              " slots are in use; release a layer before acquiring layer " + std::to_string(il)};
        waited = true;
        cv_.wait(lock);
    }
    if (waited) wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return Status::Ok();
}

const uint8_t* TrunkRing::peek(int il) const {
    std::lock_guard lock(mu_);
    const int s = slot_of(il);
    if (s < 0 || (slots_[size_t(s)].state != State::Ready && slots_[size_t(s)].state != State::InUse)) return nullptr;
    return slots_[size_t(s)].payload;
}

void TrunkRing::release(int il) {
    std::lock_guard lock(mu_);
    int s = slot_of(il);
    K3_CHECK(s >= 0 && slots_[s].state == State::InUse, "releasing trunk layer %d that is not in use", il);
    slots_[s].state = State::Ready;
    // The walk moves on: the released layer is consumed, read-ahead may take its slot.
    int next = il;
    for (int step = 1; step <= n_layers_; ++step) {
        next = (il + step) % n_layers_;
        if (streamed_[next]) break;
    }
    cursor_ = next;
    cv_.notify_all();
}

}  // namespace k3::io
