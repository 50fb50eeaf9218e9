// SpanLoader: brings a set of byte spans of the checkpoint into memory with reader threads of
// its own, and lets the engine's thread wait for any byte range of any span. The resident store
// (resident_store.cpp) uses it for the whole load and, with background loading, to hand out the
// trunk first while the routed experts are still being read.
//
// The spans are not copied: every shard is mapped (read-only, shared) and a span's bytes are
// the page cache's pages, brought in with MADV_POPULATE_READ (the kernel reads them ahead into
// the page cache and maps them; no copy). Reading with O_DIRECT into fresh anonymous memory, the
// loader this replaces, made the kernel zero every page first: on k3-mini that was 13.5 s of
// system time for 9.3 GB in a VM (each first touch of guest memory traps to the host), twice
// the time the disk needs. Populating the page cache costs 2 s of CPU for the same bytes.
// A kernel without MADV_POPULATE_READ (before 5.14) gets the same pages by pread into a scratch
// buffer. The mapping means a shard must not be truncated or rewritten in place while the
// engine runs (a replaced file, written beside it and renamed, is safe: the old one stays
// mapped); a shard cut short is a SIGBUS, which store/mapped_fault.h turns into a message.
//
// Each span's page-aligned window is cut into pieces (8 MiB); the pieces are read in order
// (the spans marked `first` before the others, each group by file and offset, so the disk sees
// long sequential runs), `threads` of them in flight. wait_ranges() has the ranges a step needs
// whose pieces are not read yet read next, exactly those bytes, all at once, and no piece starts
// meanwhile: a step that needs an expert not read yet waits for that expert, not for its piece
// or the rest of the load. A failed piece
// stays failed: every wait that covers it returns the IoError (naming the file and offset);
// nothing is retried silently.
//
// Test hook (Options::hold_path, from MemoryOptions::hold_background_load): while that file
// exists, the readers read nothing past the `first` spans, so tests run requests while experts
// are deterministically unread (the waits read what the steps need).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <span>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "io/file.h"
#include "io/read_pool.h"
#include "k3/status.h"

namespace k3 {

struct LoadSpan {
    const io::File* file = nullptr;
    int64_t offset = 0;
    int64_t nbytes = 0;
    bool first = false;  // read before every span that is not `first`
};

class SpanLoader {
public:
    struct Options {
        int threads = 8;
        int64_t piece_bytes = io::kReadChunk;  // a multiple of io::kMaxDirectAlign
        std::string hold_path;  // the test hook's file ("" = none)
    };
    // Maps every file (throws k3::Error(Io) naming it) and starts reading at once.
    SpanLoader(std::vector<LoadSpan> spans, Options options);
    // Stops: pieces not started are dropped, the readers finish their current piece and join.
    ~SpanLoader();
    SpanLoader(const SpanLoader&) = delete;
    SpanLoader& operator=(const SpanLoader&) = delete;

    // Spans keep the index they had in the constructor's vector.
    // Where byte `offset` of span i lands; its bytes are there once a wait covering them is Ok.
    const uint8_t* payload(int i) const { return spans_[size_t(i)].payload; }

    // Returns once each range's bytes [at, at + n) of its span (at counted from the span's
    // offset) are in memory. Ranges whose pieces are not read yet are read now, exactly those
    // bytes, on the reader threads all at once and ahead of any piece. The first IoError: of a
    // piece among them that failed, or of these reads.
    struct Range {
        int span = 0;
        int64_t at = 0, n = 0;
    };
    Status wait_ranges(std::span<const Range> ranges);
    // After a wait_ranges that read something, no piece starts for 100 ms (the step will likely
    // wait again at its next layer); the step's owner ends that pause early at the end of a pass.
    void resume_pieces();
    // Waits until every `first` span, or every span, is read: the first failure in piece order.
    Status wait_first() { return wait_pieces(0, n_first_pieces_); }
    Status wait_all() { return wait_pieces(0, pieces_.size()); }

    // Any thread: bytes read so far (failed pieces not counted) and in all; reads that failed
    // (pieces, and ranges a wait read).
    int64_t bytes_done() const { return bytes_done_.load(std::memory_order_relaxed); }
    int64_t bytes_total() const { return bytes_total_; }
    int64_t failures() const { return failures_.load(std::memory_order_relaxed); }
    std::string first_failure() const;
    // Every piece read (acquire: the bytes are visible to the caller once this is true).
    bool complete() const { return pieces_ok_.load(std::memory_order_acquire) == pieces_.size(); }

private:
    enum class State : uint8_t { Queued, Reading, Done, Failed };
    struct Mapping {
        const io::File* file = nullptr;
        uint8_t* base = nullptr;
        size_t length = 0;
    };
    struct SpanBuf {
        LoadSpan span;
        const Mapping* map = nullptr;
        int64_t lo = 0, len = 0;           // the page-aligned window in the file
        const uint8_t* payload = nullptr;  // map->base + offset
        size_t first_piece = 0;
    };
    struct RangeJob {
        const SpanBuf* span = nullptr;
        int64_t lo = 0, len = 0, required = 0;  // page-aligned, in the file
        Status result;
    };
    struct RangeBatch {  // one wait_ranges call; guarded by mu_
        std::vector<RangeJob> jobs;
        size_t remaining = 0;
    };
    struct Piece {
        int span = 0;
        int64_t part_lo = 0, part_len = 0, required = 0;  // within the span's window
        std::atomic<State> state{State::Queued};
        Status failure;  // written once before state becomes Failed
    };

    void reader();
    bool held() const;
    size_t take_locked();  // the next queued piece (none while the hook holds), or npos
    void read_piece(size_t p);
    void note_failure(const Status& s);  // counted, kept if first, logged
    // `exact`: read only [lo, lo + len), not the readahead window around it.
    Status populate(const SpanBuf& sb, int64_t lo, int64_t len, int64_t required, bool exact) const;
    Status wait_pieces(size_t begin, size_t end);

    std::vector<Mapping> maps_;
    std::vector<SpanBuf> spans_;
    std::vector<Piece> pieces_;   // in reading order
    int64_t piece_bytes_;
    size_t n_first_pieces_ = 0;
    int64_t bytes_total_ = 0;
    std::string hold_path_;

    mutable std::mutex mu_;
    std::condition_variable work_cv_;  // readers: ranges to read, stop
    std::deque<std::pair<RangeBatch*, size_t>> urgent_;  // ranges a step waits for
    int urgent_in_flight_ = 0;
    std::chrono::steady_clock::time_point pieces_paused_until_{};
    int readers_live_ = 0;
    std::condition_variable done_cv_;  // waiters: a piece or a range finished
    std::string first_failure_;
    size_t next_ = 0;                  // next piece in reading order
    bool stopping_ = false;
    std::atomic<size_t> pieces_ok_{0};  // Done
    std::atomic<int64_t> bytes_done_{0};
    std::atomic<int64_t> failures_{0};
    std::vector<std::thread> readers_;
};

}  // namespace k3
