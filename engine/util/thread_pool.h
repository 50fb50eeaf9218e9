// The engine's compute pool: n-1 worker threads plus the calling thread, fork-join
// parallel_for over work items taken dynamically from a shared counter. Which thread runs an
// item never changes a result (every item writes its own outputs), so the bits do not depend on
// the thread count. Waiting threads spin briefly, then sleep on a futex (std::atomic::wait): on a
// machine shared with other work, a spinning waiter would steal the core the straggler needs.
// Used only by the engine's owning thread; parallel_for must not be nested.
#pragma once
#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace k3 {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Calls fn(item, thread) for every item in [0, n_items), thread in [0, size()); returns when
    // all have run. No allocation.
    template <class F>
    void parallel_for(int64_t n_items, F&& fn) {
        using Fn = std::remove_reference_t<F>;
        run(n_items, [](void* ctx, int64_t item, int thread) { (*static_cast<Fn*>(ctx))(item, thread); },
            const_cast<void*>(static_cast<const void*>(&fn)));
    }

private:
    using Trampoline = void (*)(void*, int64_t, int);
    void run(int64_t n_items, Trampoline call, void* ctx);
    void work(int thread);
    void worker_loop(int thread);

    int n_threads_;
    std::vector<std::thread> workers_;
    // The current job.
    Trampoline call_ = nullptr;
    void* ctx_ = nullptr;
    int64_t n_items_ = 0;
    alignas(64) std::atomic<int64_t> next_{0};       // next item to take
    alignas(64) std::atomic<uint32_t> generation_{0};  // bumped to start a job (or to stop)
    alignas(64) std::atomic<int> busy_{0};             // workers still in the current job
    bool stop_ = false;
};

}  // namespace k3
