#include "store/span_loader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <tuple>

#include <spdlog/spdlog.h>

#include "k3/error.h"
#include "store/mapped_fault.h"


namespace k3 {

namespace {
constexpr size_t kNone = size_t(-1);
// Mappings and madvise ranges align to the kernel's page, 4 to 64 KiB (io/file.h page_size).
int64_t page_bytes() { return int64_t(io::page_size()); }
}

SpanLoader::SpanLoader(std::vector<LoadSpan> spans, Options options)
    : piece_bytes_(options.piece_bytes), hold_path_(std::move(options.hold_path)) {
    // One read-only mapping per file.
    for (const LoadSpan& s : spans) {
        bool have = false;
        for (const Mapping& m : maps_) have = have || m.file == s.file;
        if (have) continue;
        Mapping m;
        m.file = s.file;
        m.length = size_t(io::align_up(std::max<int64_t>(s.file->size_at_open(), 1), page_bytes()));
        void* p = mmap(nullptr, m.length, PROT_READ, MAP_SHARED, s.file->buffered_fd(), 0);
        if (p == MAP_FAILED) {
            for (const Mapping& done : maps_) munmap(done.base, done.length);
            throw Error(ErrorKind::Io, "cannot map " + s.file->path().string() + ": " + std::strerror(errno));
        }
        m.base = static_cast<uint8_t*>(p);
        maps_.push_back(m);
        register_mapped_file(m.base, m.length, s.file->path().string());
    }
    // Reading order: `first` spans, then the rest; within each, by file and offset.
    std::vector<size_t> order(spans.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const LoadSpan &x = spans[a], &y = spans[b];
        return std::make_tuple(!x.first, x.file->path(), x.offset) < std::make_tuple(!y.first, y.file->path(), y.offset);
    });
    spans_.resize(spans.size());
    size_t n_pieces = 0;
    for (size_t i : order) {
        SpanBuf& sb = spans_[i];
        sb.span = spans[i];
        for (const Mapping& m : maps_)
            if (m.file == sb.span.file) sb.map = &m;
        sb.lo = io::align_down(sb.span.offset, page_bytes());
        sb.len = io::align_up(sb.span.offset + sb.span.nbytes, page_bytes()) - sb.lo;
        if (sb.span.offset < 0 || size_t(sb.lo + sb.len) > sb.map->length)
            throw Error(ErrorKind::Checkpoint, io::io_error(sb.span.file->path(), sb.span.offset, sb.span.nbytes,
                                                            "the run lies past the end of the file")
                                                   .message);
        sb.payload = sb.map->base + sb.span.offset;
        sb.first_piece = n_pieces;
        n_pieces += size_t((sb.len + piece_bytes_ - 1) / piece_bytes_);
    }
    pieces_ = std::vector<Piece>(n_pieces);
    for (size_t i : order) {
        const SpanBuf& sb = spans_[i];
        const int64_t required = sb.span.offset + sb.span.nbytes - sb.lo;  // the rest may lie past end of file
        for (int64_t part_lo = 0; part_lo < sb.len; part_lo += piece_bytes_) {
            const size_t p = sb.first_piece + size_t(part_lo / piece_bytes_);
            Piece& piece = pieces_[p];
            piece.span = int(i);
            piece.part_lo = part_lo;
            piece.part_len = std::min(piece_bytes_, sb.len - part_lo);
            piece.required = std::clamp(required - part_lo, int64_t(0), piece.part_len);
            bytes_total_ += piece.part_len;
            if (sb.span.first) n_first_pieces_ = p + 1;
        }
    }
    readers_live_ = std::max(1, options.threads);
    for (int t = 0; t < readers_live_; ++t) readers_.emplace_back([this] { reader(); });
}

SpanLoader::~SpanLoader() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : readers_) t.join();
    for (const Mapping& m : maps_) {
        unregister_mapped_file(m.base);
        munmap(m.base, m.length);
    }
}

bool SpanLoader::held() const {
    std::error_code ec;
    return !hold_path_.empty() && std::filesystem::exists(hold_path_, ec);
}

size_t SpanLoader::take_locked() {
    if (next_ >= n_first_pieces_ && held()) return kNone;  // the hook holds back what follows the `first` spans
    while (next_ < pieces_.size()) {
        const size_t p = next_++;
        if (pieces_[p].state.load(std::memory_order_relaxed) == State::Queued) return p;
    }
    return kNone;
}

void SpanLoader::reader() {
    std::unique_lock lock(mu_);
    for (;;) {
        if (stopping_) break;
        // A step's ranges first. While any are being read, no new piece starts: the step gets
        // the disk (a piece in flight is one 8 MiB read).
        if (!urgent_.empty()) {
            const auto [batch, j] = urgent_.front();
            urgent_.pop_front();
            ++urgent_in_flight_;
            RangeJob& job = batch->jobs[j];
            lock.unlock();
            Status st = populate(*job.span, job.lo, job.len, job.required, /*exact=*/true);
            lock.lock();
            job.result = std::move(st);
            --batch->remaining;
            --urgent_in_flight_;
            done_cv_.notify_all();
            if (urgent_in_flight_ == 0) work_cv_.notify_all();
            continue;
        }
        if (urgent_in_flight_ == 0 && std::chrono::steady_clock::now() >= pieces_paused_until_) {
            const size_t p = take_locked();
            if (p != kNone) {
                pieces_[p].state.store(State::Reading, std::memory_order_relaxed);
                lock.unlock();
                read_piece(p);
                lock.lock();
                continue;
            }
            if (next_ >= pieces_.size()) break;  // nothing left to read
        }
        // Held by the test hook, or a step's reads in flight: look again when told, or soon.
        work_cv_.wait_for(lock, std::chrono::milliseconds(20));
    }
    --readers_live_;
}

// Brings [lo, lo + len) of the span's file into the page cache and maps it. The first `required`
// bytes must exist; the rest of the last page may lie past the end of the file.
Status SpanLoader::populate(const SpanBuf& sb, int64_t lo, int64_t len, int64_t required, bool exact) const {
    const io::File& f = *sb.span.file;
    // A file cut short since it was opened: the mapping would SIGBUS there; say so instead.
    struct stat st {};
    if (fstat(f.buffered_fd(), &st) == 0 && st.st_size < lo + required)
        return io::io_error(f.path(), lo, required,
                            "short read: the file is " + std::to_string(st.st_size) +
                                " bytes (file truncated or changed after start-up?)");
    // A fault on a page not in the page cache reads the readahead window around it (8 MiB on
    // the development machine's disk): right for pieces read in order, 6x the bytes for one
    // expert. An exact range is asked for first, so the faults find its pages read or in flight.
    if (exact) posix_fadvise(f.buffered_fd(), lo, len, POSIX_FADV_WILLNEED);
    if (madvise(sb.map->base + lo, size_t(len), MADV_POPULATE_READ) == 0) return Status::Ok();
    if (errno != EINVAL) return io::io_error(f.path(), lo, len, std::strerror(errno));
    // No MADV_POPULATE_READ (Linux < 5.14): read through the page cache; the mapping then finds
    // the pages there on first touch.
    thread_local std::vector<uint8_t> scratch(size_t(1) << 20);
    for (int64_t at = 0; at < required; at += int64_t(scratch.size())) {
        const int64_t n = std::min<int64_t>(int64_t(scratch.size()), required - at);
        if (Status s = f.pread_full(scratch.data(), size_t(n), lo + at); !s.ok()) return s;
    }
    return Status::Ok();
}

void SpanLoader::read_piece(size_t p) {
    Piece& piece = pieces_[p];
    const SpanBuf& sb = spans_[size_t(piece.span)];
    Status s = populate(sb, sb.lo + piece.part_lo, piece.part_len, piece.required, /*exact=*/false);
    {
        std::lock_guard lock(mu_);
        if (s.ok()) {
            piece.state.store(State::Done, std::memory_order_release);
            bytes_done_.fetch_add(piece.part_len, std::memory_order_relaxed);
            pieces_ok_.fetch_add(1, std::memory_order_release);
        } else {
            piece.failure = s;
            piece.state.store(State::Failed, std::memory_order_release);
        }
    }
    if (!s.ok()) note_failure(s);
    done_cv_.notify_all();
}

std::string SpanLoader::first_failure() const {
    std::lock_guard lock(mu_);
    return first_failure_;
}

Status SpanLoader::wait_ranges(std::span<const Range> ranges) {
    RangeBatch batch;
    for (const Range& r : ranges) {
        const SpanBuf& sb = spans_[size_t(r.span)];
        const int64_t begin = (sb.span.offset - sb.lo) + r.at;  // within the window
        const size_t first = sb.first_piece + size_t(begin / piece_bytes_);
        const size_t last = sb.first_piece + size_t((begin + std::max<int64_t>(r.n, 1) - 1) / piece_bytes_);
        bool done = true;
        for (size_t p = first; p <= last; ++p) {
            const State st = pieces_[p].state.load(std::memory_order_acquire);
            if (st == State::Failed) {
                std::lock_guard lock(mu_);
                return pieces_[p].failure;
            }
            done = done && st == State::Done;
        }
        if (done) continue;
        // Not read yet: read exactly these bytes (a piece is several experts; the step needs
        // one). The piece still comes in its turn, its pages then found in memory.
        RangeJob job;
        job.span = &sb;
        job.lo = io::align_down(sb.span.offset + r.at, page_bytes());
        job.len = io::align_up(sb.span.offset + r.at + r.n, page_bytes()) - job.lo;
        job.required = sb.span.offset + r.at + r.n - job.lo;
        batch.jobs.push_back(job);
    }
    if (batch.jobs.empty()) return Status::Ok();
    {
        std::unique_lock lock(mu_);
        if (readers_live_ > 0) {
            // On the readers, all at once (several reads in flight), ahead of any piece.
            batch.remaining = batch.jobs.size();
            for (size_t j = 0; j < batch.jobs.size(); ++j) urgent_.push_back({&batch, j});
            // The step that waits now will likely wait again a layer later: keep the disk for it
            // until it says its pass is over (resume_pieces), or a moment has passed.
            pieces_paused_until_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
            work_cv_.notify_all();
            done_cv_.wait(lock, [&] { return batch.remaining == 0; });
        } else {
            lock.unlock();  // the readers are gone (every piece taken): read here
            for (RangeJob& job : batch.jobs) job.result = populate(*job.span, job.lo, job.len, job.required, /*exact=*/true);
        }
    }
    for (const RangeJob& job : batch.jobs)
        if (!job.result.ok()) {
            note_failure(job.result);
            return job.result;
        }
    return Status::Ok();
}

void SpanLoader::resume_pieces() {
    {
        std::lock_guard lock(mu_);
        if (pieces_paused_until_ == std::chrono::steady_clock::time_point{}) return;
        pieces_paused_until_ = {};
    }
    work_cv_.notify_all();
}

void SpanLoader::note_failure(const Status& s) {
    {
        std::lock_guard lock(mu_);
        if (first_failure_.empty()) first_failure_ = s.message;
        failures_.fetch_add(1, std::memory_order_relaxed);
    }
    spdlog::error("loading the weights: {}", s.message);
}

Status SpanLoader::wait_pieces(size_t begin, size_t end) {
    auto all_done = [&] {
        for (size_t p = begin; p < end; ++p)
            if (pieces_[p].state.load(std::memory_order_acquire) != State::Done) return false;
        return true;
    };
    if (all_done()) return Status::Ok();
    std::unique_lock lock(mu_);
    // The first piece in order that is not read decides: its failure, or wait for it (so the
    // failure reported does not depend on which reader finished first).
    for (size_t p = begin; p < end;) {
        const State st = pieces_[p].state.load(std::memory_order_acquire);
        if (st == State::Done) ++p;
        else if (st == State::Failed) return pieces_[p].failure;
        else done_cv_.wait(lock);
    }
    return Status::Ok();
}

}  // namespace k3
