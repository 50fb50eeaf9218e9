#include "store/trunk_ring.h"

#include <chrono>
#include <optional>
#include <string>

#include "util/check.h"

namespace k3::io {

using State = RingSchedule::State;

TrunkRing::TrunkRing(std::vector<char> streamed, std::span<const int64_t> layer_bytes, int64_t ring_bytes, ReadLayer read)
    : schedule_(std::move(streamed), layer_bytes, align_down(ring_bytes, kRingAlign)),
      arena_(size_t(schedule_.ring_bytes())), payload_(size_t(schedule_.n_layers()), nullptr),
      failure_(size_t(schedule_.n_layers())), read_(std::move(read)) {
    const int first = schedule_.first_streamed();
    cursor_ = first >= 0 ? first : 0;
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

void TrunkRing::wait_idle() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stopping_ || (!reading_ && !schedule_.next_read(cursor_)); });
}

void TrunkRing::reader_loop() {
    std::unique_lock lock(mu_);
    for (;;) {
        std::optional<RingSchedule::Read> next;
        cv_.wait(lock, [&] { return stopping_ || (next = schedule_.next_read(cursor_)).has_value(); });
        if (stopping_) return;
        const int il = next->layer;
        schedule_.begin_read(*next);
        reading_ = true;
        uint8_t* buf = arena_.data() + next->offset;
        const size_t cap = size_t(schedule_.size_of(il));
        lock.unlock();
        const uint8_t* payload = nullptr;
        Status st = read_(il, buf, cap, &payload);
        lock.lock();
        reading_ = false;
        ++layer_reads_;
        RingSchedule::Entry* e = schedule_.find(il);  // an entry being read is never dropped
        if (st.ok()) {
            e->state = State::Ready;
            payload_[size_t(il)] = payload;
        } else {
            e->state = State::Failed;
            failure_[size_t(il)] = st;
        }
        cv_.notify_all();
    }
}

Status TrunkRing::acquire(int il, const uint8_t** run) {
    K3_CHECK(il >= 0 && il < schedule_.n_layers() && schedule_.streamed(il), "layer %d does not stream through the ring", il);
    std::unique_lock lock(mu_);
    cursor_ = il;
    cv_.notify_all();
    auto t0 = std::chrono::steady_clock::now();
    bool waited = false;
    for (;;) {
        RingSchedule::Entry* e = schedule_.find(il);
        if (e && e->state == State::Ready) {
            e->state = State::InUse;
            *run = payload_[size_t(il)];
            break;
        }
        if (e && e->state == State::Failed) {
            Status failure = failure_[size_t(il)];
            schedule_.drop(il);  // the next acquire reads it again
            cv_.notify_all();
            return failure;
        }
        if (e && e->state == State::InUse)
            return {StatusCode::Internal, "trunk layer " + std::to_string(il) + " acquired twice without release"};
        if (!e && !schedule_.fits_beside_in_use(il)) {
            std::string held;
            for (const auto& h : schedule_.entries())
                if (h.state == State::InUse) held += (held.empty() ? "" : ", ") + std::to_string(h.layer);
            return {StatusCode::Internal, "trunk ring: layers in use (" + held + ") leave no room in its " +
                                              std::to_string(schedule_.ring_bytes()) + " bytes for layer " + std::to_string(il) +
                                              "; release a layer before acquiring another"};
        }
        waited = true;
        cv_.wait(lock);
    }
    if (waited) wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return Status::Ok();
}

const uint8_t* TrunkRing::peek(int il) const {
    std::lock_guard lock(mu_);
    const RingSchedule::Entry* e = schedule_.find(il);
    if (!e || (e->state != State::Ready && e->state != State::InUse)) return nullptr;
    return payload_[size_t(il)];
}

void TrunkRing::release(int il) {
    std::lock_guard lock(mu_);
    RingSchedule::Entry* e = schedule_.find(il);
    K3_CHECK(e && e->state == State::InUse, "releasing trunk layer %d that is not in use", il);
    e->state = State::Ready;  // consumed: read-ahead may take its bytes, peek still sees it until then
    cursor_ = schedule_.next_streamed(il);
    cv_.notify_all();
}

}  // namespace k3::io
