// ThreadPool (thread_pool.h).
#include "util/thread_pool.h"

#include "util/check.h"

namespace k3 {

namespace {

// About 20-50 microseconds of polling before a waiter sleeps.
constexpr int kSpins = 2000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& w : workers_) w.join();
}

void ThreadPool::work(int thread) {
    for (int64_t item; (item = next_.fetch_add(1, std::memory_order_relaxed)) < n_items_;) call_(ctx_, item, thread);
}

void ThreadPool::worker_loop(int thread) {
    uint32_t seen = 0;
    for (;;) {
        // wait for a new generation: spin, then sleep
        uint32_t g = generation_.load(std::memory_order_acquire);
        for (int i = 0; g == seen && i < kSpins; ++i) {
            cpu_relax();
            g = generation_.load(std::memory_order_acquire);
        }
        while (g == seen) {
            generation_.wait(seen, std::memory_order_acquire);
            g = generation_.load(std::memory_order_acquire);
        }
        seen = g;
        if (stop_) return;
        work(thread);
        if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) busy_.notify_one();
    }
}

void ThreadPool::run(int64_t n_items, Trampoline call, void* ctx) {
    if (n_items <= 0) return;
    if (n_threads_ == 1 || n_items == 1) {
        for (int64_t i = 0; i < n_items; ++i) call(ctx, i, 0);
        return;
    }
    K3_CHECK(busy_.load() == 0, "ThreadPool::parallel_for is not reentrant");
    call_ = call;
    ctx_ = ctx;
    n_items_ = n_items;
    next_.store(0, std::memory_order_relaxed);
    busy_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    work(0);
    // wait for the workers to finish their last items: spin, then sleep
    int b = busy_.load(std::memory_order_acquire);
    for (int i = 0; b != 0 && i < kSpins; ++i) {
        cpu_relax();
        b = busy_.load(std::memory_order_acquire);
    }
    while (b != 0) {
        busy_.wait(b, std::memory_order_acquire);
        b = busy_.load(std::memory_order_acquire);
    }
}

}  // namespace k3
