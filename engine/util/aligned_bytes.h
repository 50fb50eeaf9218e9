// AlignedBytes: an owned, page-aligned byte buffer (weights are read into these so that every
// tensor inside keeps the alignment of its offset in the run). Move-only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>

namespace k3 {

class AlignedBytes {
public:
    static constexpr size_t kAlign = 4096;
    AlignedBytes() = default;
    explicit AlignedBytes(size_t n) : size_(n) {
        if (n == 0) return;
        void* p = nullptr;
        if (posix_memalign(&p, kAlign, (n + kAlign - 1) / kAlign * kAlign) != 0) throw std::bad_alloc();
        data_ = static_cast<uint8_t*>(p);
    }
    ~AlignedBytes() { std::free(data_); }
    AlignedBytes(AlignedBytes&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    AlignedBytes& operator=(AlignedBytes&& o) noexcept {
        std::swap(data_, o.data_);
        std::swap(size_, o.size_);
        return *this;
    }
    AlignedBytes(const AlignedBytes&) = delete;
    AlignedBytes& operator=(const AlignedBytes&) = delete;

    uint8_t* data() { return data_; }
    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

private:
    uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace k3
