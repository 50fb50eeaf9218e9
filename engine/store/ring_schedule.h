// Where the trunk ring puts layers and which one it reads next: the ring's decisions without its
// threads or buffers, so the ring (trunk_ring.h) and the planner's walk simulation (below) make
// the same ones. The ring is a byte budget, not uniform slots: a streamed layer takes its own
// (4096-aligned) size at some offset of the arena, and the reader reads ahead, in walk order
// (0..n-1, then 0 again), as many of the following streamed layers as fit. Rules that keep it
// exact (the ring holds the lock around every call):
//  - a layer being read, in use, or inside the read-ahead window (the streamed layers from the
//    cursor, in walk order, while their sizes add up to at most the ring) is never overwritten,
//    except that a read-ahead layer may give way to one needed before it (after the walk jumps
//    back; it is read again when its turn comes);
//  - reads start in walk order: a later layer is never read while an earlier wanted one waits
//    for space.
// With room for one layer only, the next read starts when the layer in use is released: no
// overlap, and nothing overwrites the layer being computed.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace k3::io {

inline constexpr int64_t kRingAlign = 4096;  // O_DIRECT buffer alignment (io/file.h kMaxDirectAlign)

class RingSchedule {
public:
    enum class State { Reading, Ready, InUse, Failed };
    struct Entry {
        int layer = -1;
        int64_t offset = 0, size = 0;
        State state = State::Reading;
    };
    struct Read {
        int layer = -1;
        int64_t offset = 0;
    };

    // `streamed[il]` marks the layers that go through the ring, `layer_bytes[il]` what each
    // takes (rounded up to kRingAlign here); `ring_bytes` must hold the largest streamed layer.
    RingSchedule(std::vector<char> streamed, std::span<const int64_t> layer_bytes, int64_t ring_bytes);

    int64_t ring_bytes() const { return ring_bytes_; }
    int n_layers() const { return int(streamed_.size()); }
    bool streamed(int il) const { return streamed_[size_t(il)] != 0; }
    int64_t size_of(int il) const { return size_[size_t(il)]; }
    int first_streamed() const;
    int next_streamed(int il) const;  // the streamed layer after il in walk order (wrapping)

    // The streamed layers from `cursor` in walk order while their sizes add up to at most the
    // ring (always at least the first, never one layer twice).
    std::vector<int> window(int cursor) const;
    // The next read to start for the walk at `cursor`, if space allows now.
    std::optional<Read> next_read(int cursor) const;
    // Could layer il be placed once every layer not in use has gone? (false: waiting for it
    // would never end while the held layers stay held)
    bool fits_beside_in_use(int il) const;

    // Records the read and drops the entries its bytes overlap (next_read chose only those that
    // may go).
    void begin_read(const Read& r);
    Entry* find(int il);
    const Entry* find(int il) const;
    void drop(int il);
    std::span<const Entry> entries() const { return entries_; }

private:
    // An offset where `size` bytes fit clear of every entry `keep` says stays; -1 if none. Tries
    // the arena's two ends first, then the middle (ring_schedule.cpp says why).
    template <class Keep>
    int64_t place(int64_t size, Keep keep) const;

    std::vector<char> streamed_;
    std::vector<int64_t> size_;
    int64_t ring_bytes_;
    std::vector<Entry> entries_;
    int64_t head_ = 0;  // end of the most recently placed layer
};

// What the ring does over a steady walk (every layer computed in turn, reads taking no time): the
// planner's and the projection's view of a ring of `ring_bytes`.
struct RingWalk {
    std::vector<char> overlapped;  // [n_layers] streamed layer whose read starts before the layer
                                   // before it in the walk is computed (its read overlaps compute)
    int waiting_layers = 0;        // streamed layers whose read does not (read after a release)
    std::vector<char> reread;      // [n_layers] streamed layer read again in every walk; a layer
                                   // that never has to give its bytes away stays in the ring
                                   // from one walk to the next and is read only once
    int kept_layers = 0;           // streamed layers that stay (not reread)
    int min_ahead = 0, max_ahead = 0;  // streamed layers held ahead of the one computed
};
RingWalk simulate_ring_walk(const std::vector<char>& streamed, std::span<const int64_t> layer_bytes, int64_t ring_bytes);

}  // namespace k3::io
