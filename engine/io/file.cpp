#include "io/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <spdlog/spdlog.h>

#include "k3/error.h"

namespace k3::io {

namespace {

std::atomic<PreadFn> g_pread_hook{nullptr};

ssize_t do_pread(int fd, void* buf, size_t n, off_t offset) {
    PreadFn hook = g_pread_hook.load(std::memory_order_relaxed);
    return hook ? hook(fd, buf, n, offset) : ::pread(fd, buf, n, offset);
}

// Logged once per process: every shard on one filesystem would say the same thing.
void log_direct_refused_once(const std::filesystem::path& path, const char* why) {
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true))
        spdlog::warn("O_DIRECT refused for {} ({}): reading weights through the page cache", path.string(), why);
}

// The alignment O_DIRECT needs on this file, or 0 when it cannot be used at all.
size_t probe_direct_alignment(int direct_fd, int64_t file_size) {
#ifdef STATX_DIOALIGN
    struct statx stx {};
    if (statx(direct_fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN)) {
        if (stx.stx_dio_offset_align == 0) return 0;
        size_t a = std::max<size_t>(stx.stx_dio_offset_align, stx.stx_dio_mem_align);
        if (a <= kMaxDirectAlign) return a;
        return 0;
    }
#endif
    // No statx answer: try a real read at 512-byte granularity, then at 4096.
    void* probe = nullptr;
    if (posix_memalign(&probe, kMaxDirectAlign, 2 * kMaxDirectAlign) != 0) return 0;
    size_t result = 0;
    for (size_t a : {size_t(512), kMaxDirectAlign}) {
        off_t off = file_size >= int64_t(2 * a) ? off_t(a) : 0;
        ssize_t r;
        do r = ::pread(direct_fd, probe, a, off);
        while (r < 0 && errno == EINTR);
        if (r >= 0) {
            result = a;
            break;
        }
        if (errno != EINVAL) break;
    }
    free(probe);
    return result;
}

}  // namespace

void set_pread_hook_for_tests(PreadFn fn) { g_pread_hook.store(fn); }

Status io_error(const std::filesystem::path& path, int64_t offset, int64_t nbytes, const std::string& reason) {
    return {StatusCode::IoError, "read failed: " + path.string() + " at offset " + std::to_string(offset) + " (" +
                                     std::to_string(nbytes) + " bytes): " + reason};
}

size_t page_size() {
    static const size_t bytes = [] {
        const long n = sysconf(_SC_PAGESIZE);
        return n > 0 ? size_t(n) : size_t(4096);
    }();
    return bytes;
}

void give_pages_back(uint8_t* data, size_t bytes) {
    const uintptr_t page = uintptr_t(page_size());
    const uintptr_t b = reinterpret_cast<uintptr_t>(data);
    const uintptr_t begin = (b + page - 1) / page * page, end = (b + bytes) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// ---- AlignedBuffer ----

AlignedBuffer::AlignedBuffer(size_t bytes) {
    if (bytes == 0) return;
    // mmap gives page alignment; for 2 MiB alignment map 2 MiB extra and trim the ends.
    bool huge = bytes >= kHugePage;
    // Page-rounded, so the trims below unmap whole pages on 16 and 64 KiB page kernels too.
    const size_t page = page_size();
    size_t align = huge ? std::max(kHugePage, page) : page;
    size_t len = size_t(align_up(int64_t(bytes), int64_t(page)));
    size_t map_len = huge ? len + kHugePage : len;
    void* p = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        throw Error(ErrorKind::Memory, "cannot allocate " + std::to_string(bytes) + " bytes for weights: " +
                                           std::strerror(errno));
    auto base = reinterpret_cast<uintptr_t>(p);
    uintptr_t start = (base + align - 1) / align * align;
    if (huge) {
        if (start > base) munmap(p, start - base);
        uintptr_t end = start + len, map_end = base + map_len;
        if (map_end > end) munmap(reinterpret_cast<void*>(end), map_end - end);
        // No MADV_HUGEPAGE: with the common THP defrag=madvise setting every first touch of a
        // huge page may stall in direct compaction; on the development machine that made the
        // first token 5x slower (k3-mini, laptop preset: 18.5 s vs 3.4 s) for no decode gain.
        // The 2 MiB alignment stays so THP=always systems can still back these with huge pages.
    }
    data_ = reinterpret_cast<uint8_t*>(start);
    size_ = bytes;
    mapped_ = len;
}

AlignedBuffer::~AlignedBuffer() { release(); }

void AlignedBuffer::release() {
    if (data_) munmap(data_, mapped_);
    data_ = nullptr;
    size_ = mapped_ = 0;
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        mapped_ = std::exchange(other.mapped_, 0);
    }
    return *this;
}

// ---- File ----

File File::open(const std::filesystem::path& path, bool try_direct) {
    File f;
    f.path_ = path;
    f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f.fd_ < 0) throw Error(ErrorKind::Io, "cannot open " + path.string() + ": " + std::strerror(errno));
    struct stat st {};
    if (fstat(f.fd_, &st) != 0) throw Error(ErrorKind::Io, "cannot stat " + path.string() + ": " + std::strerror(errno));
    f.size_ = st.st_size;
    if (try_direct) {
        f.direct_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
        if (f.direct_fd_ < 0) {
            log_direct_refused_once(path, std::strerror(errno));
        } else {
            size_t a = probe_direct_alignment(f.direct_fd_, f.size_);
            if (a == 0) {
                log_direct_refused_once(path, "no usable alignment");
                ::close(f.direct_fd_);
                f.direct_fd_ = -1;
            } else {
                f.align_ = a;
            }
        }
    }
    return f;
}

File::~File() { close_all(); }

void File::close_all() {
    if (fd_ >= 0) ::close(fd_);
    if (direct_fd_ >= 0) ::close(direct_fd_);
    fd_ = direct_fd_ = -1;
}

File::File(File&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), direct_fd_(std::exchange(other.direct_fd_, -1)),
      align_(other.align_), size_(other.size_), direct_refused_(other.direct_refused_.load()) {}

File& File::operator=(File&& other) noexcept {
    if (this != &other) {
        close_all();
        path_ = std::move(other.path_);
        fd_ = std::exchange(other.fd_, -1);
        direct_fd_ = std::exchange(other.direct_fd_, -1);
        align_ = other.align_;
        size_ = other.size_;
        direct_refused_ = other.direct_refused_.load();
    }
    return *this;
}

Status File::pread_full(void* dst, size_t n, int64_t offset) const {
    int64_t got = 0;
    Status s = read_loop(fd_, static_cast<uint8_t*>(dst), offset, int64_t(n), int64_t(n), &got);
    return s;
}

void File::read_exact(void* dst, int64_t n, int64_t offset, const std::string& what) const {
    if (Status s = pread_full(dst, size_t(n), offset); !s.ok()) throw Error(ErrorKind::Io, "reading " + what + ": " + s.message);
}

void File::window(int64_t offset, int64_t n, int64_t* lo, int64_t* len) const {
    // Buffered files still use 4096 windows so the payload's address alignment does not depend
    // on which path read it.
    int64_t a = int64_t(std::max(align_, kMaxDirectAlign));
    *lo = align_down(offset, a);
    *len = align_up(offset + n, a) - *lo;
}

Status File::read_run(int64_t offset, int64_t n, uint8_t* buf, size_t cap, const uint8_t** payload) const {
    int64_t lo = 0, len = 0;
    window(offset, n, &lo, &len);
    if (int64_t(cap) < len)
        return io_error(path_, offset, n, "buffer of " + std::to_string(cap) + " bytes is smaller than the window");
    Status s = read_window_part(buf, lo, len, offset + n - lo);
    if (!s.ok()) return s;
    *payload = buf + (offset - lo);
    return Status::Ok();
}

Status File::read_window_part(uint8_t* dst, int64_t lo, int64_t len, int64_t required) const {
    int64_t got = 0;
    int fd = direct() ? direct_fd_ : fd_;
    return read_loop(fd, dst, lo, len, required, &got);
}

// Reads until `len` bytes or end of file. EINTR is retried; a short read is continued; a read
// the direct descriptor refuses (EINVAL), or a continuation that is no longer aligned, goes on
// through the buffered descriptor. Fewer than `required` bytes is an error.
Status File::read_loop(int fd, uint8_t* dst, int64_t lo, int64_t len, int64_t required, int64_t* got) const {
    int64_t done = 0;
    while (done < len) {
        bool on_direct = fd == direct_fd_ && fd >= 0;
        ssize_t r = do_pread(fd, dst + done, size_t(len - done), off_t(lo + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            if (on_direct && errno == EINVAL) {
                if (!direct_refused_.exchange(true)) log_direct_refused_once(path_, "EINVAL on read");
                fd = fd_;
                continue;
            }
            return io_error(path_, lo + done, len - done, std::strerror(errno));
        }
        if (r == 0) break;  // end of file
        done += r;
        if (on_direct && (r % ssize_t(align_) != 0)) fd = fd_;  // an unaligned continuation
    }
    *got = done;
    if (done < required)
        return io_error(path_, lo + done, required - done,
                        "short read: got " + std::to_string(done) + " of " + std::to_string(required) +
                            " bytes (file truncated or changed after start-up?)");
    return Status::Ok();
}

}  // namespace k3::io
