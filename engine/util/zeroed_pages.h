// ZeroedPages<T>: a std::allocator replacement for large scratch arrays whose elements start
// at zero without being written. Large blocks come straight from anonymous mmap (the kernel
// hands out zero pages on first touch), small ones from calloc, and value-initialising
// construction is a no-op, so std::vector<T, ZeroedPages<T>>(n) costs no memory until a page
// is actually written. The forward pass's activations are sized for the largest prefill chunk
// but a decode step writes only the first row of each: with std::vector's zero fill every byte
// counted in the resident set; with this only the rows in use do.
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <vector>

namespace k3 {

template <class T>
class ZeroedPages {
    static_assert(std::is_trivially_default_constructible_v<T>, "ZeroedPages is for plain numbers");

public:
    using value_type = T;
    static constexpr size_t kMmapFrom = size_t(64) << 10;

    ZeroedPages() noexcept = default;
    template <class U>
    ZeroedPages(const ZeroedPages<U>&) noexcept {}

    T* allocate(size_t n) {
        const size_t bytes = n * sizeof(T);
        if (bytes >= kMmapFrom) {
            void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) throw std::bad_alloc();
            return static_cast<T*>(p);
        }
        void* p = std::calloc(n ? n : 1, sizeof(T));
        if (!p) throw std::bad_alloc();
        return static_cast<T*>(p);
    }
    void deallocate(T* p, size_t n) noexcept {
        const size_t bytes = n * sizeof(T);
        if (bytes >= kMmapFrom) munmap(p, bytes);
        else std::free(p);
    }
    // Value-initialisation leaves the (already zero) memory alone; anything else constructs.
    template <class U>
    void construct(U*) noexcept {}
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(static_cast<Args&&>(args)...);
    }

    template <class U>
    bool operator==(const ZeroedPages<U>&) const noexcept { return true; }
};

// A float array that reads as zeros and takes memory only where written.
template <class T>
using ZeroedArray = std::vector<T, ZeroedPages<T>>;

}  // namespace k3
