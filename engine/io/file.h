// Files and buffers for weight reads. A File holds two descriptors on one path: an O_DIRECT one
// (bypasses the page cache, so streamed weights do not evict the engine's own memory and reads
// run at device speed) and a buffered one (the fallback, and the way to finish a read that ends
// off an alignment boundary). O_DIRECT needs the file offset, the length and the memory address
// aligned to the device's requirement, which is probed at open (statx STATX_DIOALIGN when the
// kernel reports it, else a real probe read). Reads widen [offset, offset+n) to the enclosing
// aligned window, read it into an aligned buffer and hand out buffer + (offset - window start).
// Every failure is a Status naming the file and the offset; nothing is retried silently except
// EINTR and short reads, which are continued.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "k3/status.h"

namespace k3::io {

// Memory for O_DIRECT reads: 4096-aligned, or 2 MiB aligned for buffers of 2 MiB or more (so a
// system with transparent huge pages always on backs them with huge pages: O_DIRECT pins every
// page of a read, and a huge page is one pin instead of 512). MADV_HUGEPAGE is not asked for:
// see file.cpp.
// Move-only; throws k3::Error(Memory) when the allocation fails.
class AlignedBuffer {
public:
    AlignedBuffer() = default;
    explicit AlignedBuffer(size_t bytes);
    ~AlignedBuffer();
    AlignedBuffer(AlignedBuffer&& other) noexcept;
    AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;

    uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

private:
    void release();
    uint8_t* data_ = nullptr;
    size_t size_ = 0;
    size_t mapped_ = 0;  // bytes mapped (0 when empty)
};

inline constexpr size_t kHugePage = size_t(2) << 20;
inline constexpr size_t kMaxDirectAlign = 4096;

// The kernel's page size, what mmap, munmap and madvise align to: 4 KiB on x86-64, but 4, 16 or
// 64 KiB on aarch64 by how the kernel was built (64 KiB kernels are common on Grace and on
// RHEL-family ARM servers; docs/platforms.md). O_DIRECT alignment is the device's, not this.
size_t page_size();

// Gives the whole pages inside [data, data + bytes) of a private anonymous mapping back to the
// kernel (madvise MADV_DONTNEED): they read as zeros until written again. How a prefill pass
// borrows memory that holds weights (docs/performance.md, "Prefill passes").
void give_pages_back(uint8_t* data, size_t bytes);

inline int64_t align_down(int64_t x, int64_t a) { return x / a * a; }
inline int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// The largest aligned window any run of `nbytes` can need, whatever its offset: the buffer size
// to give read_run() for it.
inline size_t window_capacity(int64_t nbytes, size_t align = kMaxDirectAlign) {
    return size_t(align_up(nbytes, int64_t(align)) + int64_t(align));
}

// Test hook: every read of every File goes through this function instead of ::pread (nullptr
// restores ::pread). Tests use it to inject EINTR, short reads and I/O errors.
using PreadFn = ssize_t (*)(int fd, void* buf, size_t n, off_t offset);
void set_pread_hook_for_tests(PreadFn fn);

class File {
public:
    File() = default;
    // Opens `path` for reading; O_DIRECT when `try_direct` and the filesystem accepts it (a
    // refusal is logged once per process and the file is read buffered). Throws k3::Error(Io)
    // naming the path when it cannot be opened.
    static File open(const std::filesystem::path& path, bool try_direct = true);
    ~File();
    File(File&& other) noexcept;
    File& operator=(File&& other) noexcept;
    File(const File&) = delete;
    File& operator=(const File&) = delete;

    const std::filesystem::path& path() const { return path_; }
    int64_t size_at_open() const { return size_; }
    bool direct() const { return direct_fd_ >= 0 && !direct_refused_.load(std::memory_order_relaxed); }
    size_t alignment() const { return align_; }
    int buffered_fd() const { return fd_; }

    // Reads exactly n bytes at `offset` into dst (any alignment) through the page cache.
    Status pread_full(void* dst, size_t n, int64_t offset) const;
    // The same for reads made once at load (model-level tensors, resident runs, headers): a
    // failure is thrown as k3::Error(Io) naming `what`, the file and the offset.
    void read_exact(void* dst, int64_t n, int64_t offset, const std::string& what) const;

    // Reads [offset, offset + n) into `buf` (aligned to kMaxDirectAlign, `cap` >=
    // window_capacity(n)) and sets *payload to where byte `offset` landed. The run must lie
    // completely inside the file: anything less is an IoError (file truncated after start-up).
    Status read_run(int64_t offset, int64_t n, uint8_t* buf, size_t cap, const uint8_t** payload) const;

    // The aligned window read_run uses for a run: [*lo, *lo + *len).
    void window(int64_t offset, int64_t n, int64_t* lo, int64_t* len) const;

    // Reads the aligned part [lo, lo + len) of a window into dst (aligned), of which the first
    // `required` bytes must exist (the rest may lie past end of file). Used by read_run and by
    // the read pool to split one large window into several reads in flight.
    Status read_window_part(uint8_t* dst, int64_t lo, int64_t len, int64_t required) const;

private:
    Status read_loop(int fd, uint8_t* dst, int64_t lo, int64_t len, int64_t required, int64_t* got) const;
    void close_all();

    std::filesystem::path path_;
    int fd_ = -1;
    int direct_fd_ = -1;
    size_t align_ = 1;
    int64_t size_ = 0;
    mutable std::atomic<bool> direct_refused_{false};
};

// "read failed: <path> at offset N (M bytes): <reason>" as an IoError status.
Status io_error(const std::filesystem::path& path, int64_t offset, int64_t nbytes, const std::string& reason);

}  // namespace k3::io
