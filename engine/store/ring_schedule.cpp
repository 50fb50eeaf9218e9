#include "store/ring_schedule.h"

#include <algorithm>

#include "io/file.h"
#include "util/check.h"

namespace k3::io {

RingSchedule::RingSchedule(std::vector<char> streamed, std::span<const int64_t> layer_bytes, int64_t ring_bytes)
    : streamed_(std::move(streamed)), ring_bytes_(ring_bytes) {
    K3_CHECK(layer_bytes.size() == streamed_.size(), "ring: %zu layer sizes for %zu layers", layer_bytes.size(),
             streamed_.size());
    for (size_t il = 0; il < streamed_.size(); ++il) {
        size_.push_back(align_up(std::max<int64_t>(layer_bytes[il], 1), kRingAlign));
        K3_CHECK(!streamed_[il] || size_.back() <= ring_bytes_, "ring of %lld bytes cannot hold layer %zu (%lld bytes)",
                 (long long)ring_bytes_, il, (long long)size_.back());
    }
}

int RingSchedule::first_streamed() const {
    for (int il = 0; il < n_layers(); ++il)
        if (streamed(il)) return il;
    return -1;
}

int RingSchedule::next_streamed(int il) const {
    for (int step = 1; step <= n_layers(); ++step) {
        const int next = (il + step) % n_layers();
        if (streamed(next)) return next;
    }
    return il;
}

std::vector<int> RingSchedule::window(int cursor) const {
    std::vector<int> out;
    int64_t sum = 0;
    for (int step = 0; step < n_layers(); ++step) {
        const int il = (cursor + step) % n_layers();
        if (!streamed(il)) continue;
        if (!out.empty() && sum + size_of(il) > ring_bytes_) break;
        sum += size_of(il);
        out.push_back(il);
    }
    return out;
}

template <class Keep>
int64_t RingSchedule::place(int64_t size, Keep keep) const {
    // The arena's two ends first: layers read one after the other then alternate between them,
    // so while one is in use the next (any two that add up to the ring) fits at the other end.
    // A plain circular order (just after the last one) would leave the layer in use in the
    // middle, the free bytes split on both sides of it. Then the middle: just after the last
    // placed layer, after or before each layer that stays (every gap starts at 0 or at an
    // entry's end, so no free place is missed).
    std::vector<int64_t> candidates = {0, ring_bytes_ - size, head_};
    for (const Entry& e : entries_)
        if (keep(e)) {
            candidates.push_back(e.offset + e.size);
            candidates.push_back(e.offset - size);
        }
    for (int64_t at : candidates) {
        if (at < 0 || at + size > ring_bytes_) continue;
        const bool clear = std::none_of(entries_.begin(), entries_.end(), [&](const Entry& e) {
            return keep(e) && e.offset < at + size && at < e.offset + e.size;
        });
        if (clear) return at;
    }
    return -1;
}

std::optional<RingSchedule::Read> RingSchedule::next_read(int cursor) const {
    const std::vector<int> wanted = window(cursor);
    auto rank = [&](int il) {
        auto it = std::find(wanted.begin(), wanted.end(), il);
        return size_t(it - wanted.begin());  // wanted.size() when not wanted
    };
    for (size_t w = 0; w < wanted.size(); ++w) {
        const int il = wanted[w];
        if (find(il)) continue;
        // Over layers nobody wants (consumed, or left behind by a jump) as if free; else also
        // over read-ahead needed only after this one. Never over a read, a layer in use, or a
        // wanted layer that comes first.
        for (int pass = 0; pass < 2; ++pass) {
            const int64_t at = place(size_of(il), [&](const Entry& e) {
                if (e.state == State::Reading || e.state == State::InUse) return true;
                const size_t r = rank(e.layer);
                if (r == wanted.size()) return false;
                if (pass == 1 && r > w) return false;
                return true;
            });
            if (at >= 0) return Read{il, at};
        }
        return std::nullopt;  // keep walk order: a later layer waits for this one's space
    }
    return std::nullopt;
}

bool RingSchedule::fits_beside_in_use(int il) const {
    return find(il) || place(size_of(il), [](const Entry& e) { return e.state == State::InUse; }) >= 0;
}

void RingSchedule::begin_read(const Read& r) {
    const int64_t size = size_of(r.layer);
    std::erase_if(entries_, [&](const Entry& e) {
        const bool overlaps = e.offset < r.offset + size && r.offset < e.offset + e.size;
        K3_CHECK(!overlaps || (e.state != State::Reading && e.state != State::InUse),
                 "ring: layer %d would overwrite layer %d while it is read or in use", r.layer, e.layer);
        return overlaps;
    });
    entries_.push_back({r.layer, r.offset, size, State::Reading});
    head_ = r.offset + size;
}

RingSchedule::Entry* RingSchedule::find(int il) {
    for (Entry& e : entries_)
        if (e.layer == il) return &e;
    return nullptr;
}

const RingSchedule::Entry* RingSchedule::find(int il) const {
    for (const Entry& e : entries_)
        if (e.layer == il) return &e;
    return nullptr;
}

void RingSchedule::drop(int il) {
    std::erase_if(entries_, [&](const Entry& e) { return e.layer == il; });
}

RingWalk simulate_ring_walk(const std::vector<char>& streamed, std::span<const int64_t> layer_bytes, int64_t ring_bytes) {
    RingWalk walk;
    const int n = int(streamed.size());
    walk.overlapped.assign(size_t(n), 0);
    walk.reread.assign(size_t(n), 0);
    RingSchedule s(streamed, layer_bytes, ring_bytes);
    if (s.first_streamed() < 0) return walk;
    int cursor = s.first_streamed();
    bool last = false;
    // The reader, with reads that take no time: everything space allows, in walk order.
    auto fill = [&] {
        while (auto r = s.next_read(cursor)) {
            if (last) walk.reread[size_t(r->layer)] = 1;
            s.begin_read(*r);
            s.find(r->layer)->state = RingSchedule::State::Ready;
        }
    };
    bool counted = false;
    // Two walks settle the ring; the third is the steady state that is counted.
    for (int pass = 0; pass < 3; ++pass) {
        last = pass == 2;
        for (int l = 0; l < n; ++l) {
            if (s.streamed(l)) {
                cursor = l;
                fill();  // nothing is in use: the cursor's layer always gets a place
                K3_CHECK(s.find(l), "ring simulation: layer %d found no place", l);
                s.find(l)->state = RingSchedule::State::InUse;
            }
            fill();  // what is read while layer l computes
            const int next = (l + 1) % n;
            if (last && next != l && s.streamed(next)) walk.overlapped[size_t(next)] = s.find(next) != nullptr;
            if (last && s.streamed(l)) {
                int ahead = 0;
                for (int il : s.window(cursor))
                    if (il != l && s.find(il) && s.find(il)->state == RingSchedule::State::Ready) ++ahead;
                walk.min_ahead = counted ? std::min(walk.min_ahead, ahead) : ahead;
                walk.max_ahead = counted ? std::max(walk.max_ahead, ahead) : ahead;
                counted = true;
            }
            if (s.streamed(l)) {
                s.find(l)->state = RingSchedule::State::Ready;  // consumed: its bytes may go
                cursor = s.next_streamed(l);
            }
        }
    }
    for (int il = 0; il < n; ++il)
        if (streamed[size_t(il)]) {
            walk.waiting_layers += !walk.overlapped[size_t(il)];
            walk.kept_layers += !walk.reread[size_t(il)];
        }
    return walk;
}

}  // namespace k3::io
