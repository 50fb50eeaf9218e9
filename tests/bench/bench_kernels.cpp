// Kernel speed against this machine's memory read bandwidth, both measured in the same run.
//
//   build/tests/bench/bench_kernels [--quick]
//
// First a streaming fp32 sum over a 1 GiB buffer (1 and 2 threads) gives the read bandwidth.
// Then every kernel set this CPU runs is timed on K3-like and k3-mini-like shapes, with the
// weights spread over a pool of copies bigger than the last-level cache so every call streams
// from DRAM, as decode does. Effective GB/s = weight bytes / time; ratio = that / bandwidth with
// the same thread count (1.0 = the kernel reads weights as fast as memory delivers them).
// Two threads split the rows, as the engine does.
//
// Each figure is given twice: by wall clock, and by the CPU time of the busiest of our threads
// (threads wait on a condition variable, so waiting costs no CPU time). On a dedicated machine
// the two agree; on a shared one the CPU-time figure is what the kernel does while it runs,
// and the wall-clock one includes time other processes took. Compare ratios, not absolutes.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/kernels.h"

using namespace k3;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double thread_cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// A second thread that runs one job per call and sleeps (no spinning) in between, so that a
// busy machine does not turn waiting into burnt CPU time.
class Helper {
  public:
    Helper() : thread_([this] { loop(); }) {}
    ~Helper() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        thread_.join();
    }
    // Runs job on the helper thread and returns that thread's CPU seconds for it.
    void start(std::function<void()> job) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            job_ = std::move(job);
            done_ = false;
        }
        wake_.notify_all();
    }
    double wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        finished_.wait(lock, [this] { return done_; });
        return cpu_;
    }

  private:
    void loop() {
        for (;;) {
            std::function<void()> job;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [this] { return stop_ || job_ != nullptr; });
                if (stop_) return;
                job = std::move(job_);
                job_ = nullptr;
            }
            const double c0 = thread_cpu_seconds();
            job();
            const double c = thread_cpu_seconds() - c0;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                cpu_ = c;
                done_ = true;
            }
            finished_.notify_all();
        }
    }
    std::mutex mutex_;
    std::condition_variable wake_, finished_;
    std::function<void()> job_;
    bool stop_ = false, done_ = true;
    double cpu_ = 0;
    std::thread thread_;
};

Helper* g_helper = nullptr;

// Splits [0, n) between `threads` (1 or 2) threads, calls fn(begin, count) on each, and
// returns the CPU seconds of the busier thread.
double split_rows(int threads, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    if (threads == 1) {
        const double c0 = thread_cpu_seconds();
        fn(0, n);
        return thread_cpu_seconds() - c0;
    }
    const int64_t half = n / 2;
    g_helper->start([&] { fn(half, n - half); });
    const double c0 = thread_cpu_seconds();
    fn(0, half);
    const double mine = thread_cpu_seconds() - c0;
    return std::max(mine, g_helper->wait());
}

struct Timing {
    double wall;  // seconds per call, best of the reps
    double cpu;   // CPU seconds of the busiest thread per call, best of the reps
};

// fn(i) runs call i and returns its CPU seconds. Each rep runs enough calls to last about
// min_seconds of wall time.
Timing time_per_call(const std::function<double(int64_t)>& fn, double min_seconds, int reps = 3) {
    fn(0);  // warm-up
    int64_t calls = 1;
    for (;;) {
        const auto t0 = Clock::now();
        for (int64_t i = 0; i < calls; ++i) fn(i);
        if (seconds_since(t0) >= min_seconds / 4 || calls > (int64_t{1} << 30)) break;
        calls *= 2;
    }
    calls *= 4;
    Timing best{1e30, 1e30};
    for (int r = 0; r < reps; ++r) {
        double cpu = 0;
        const auto t0 = Clock::now();
        for (int64_t i = 0; i < calls; ++i) cpu += fn(i);
        best.wall = std::min(best.wall, seconds_since(t0) / calls);
        best.cpu = std::min(best.cpu, cpu / calls);
    }
    return best;
}

// Streaming read of buf[begin, begin + n); 16 independent partial sums so the adds vectorise
// without reassociation and the loop is load-bound.
float stream_sum(const float* buf, int64_t n) {
    float acc[16] = {};
    for (int64_t i = 0; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; ++l) acc[l] += buf[i + l];
    float total = 0;
    for (float a : acc) total += a;
    return total;
}

struct Bandwidth {
    double wall, cpu;  // GB/s
};

Bandwidth measure_bandwidth(int threads, bool quick) {
    const int64_t n = (quick ? (int64_t{256} << 20) : (int64_t{1} << 30)) / 4;
    std::vector<float> buf(n);
    for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i & 1023);
    volatile float sink = 0;
    const Timing t = time_per_call(
        [&](int64_t) {
            return split_rows(threads, n, [&](int64_t b, int64_t c) { sink = sink + stream_sum(buf.data() + b, c); });
        },
        0.5, 5);
    return {n * 4.0 / t.wall / 1e9, n * 4.0 / t.cpu / 1e9};
}

struct Bf16Pool {
    int64_t rows, cols;
    std::vector<std::vector<uint16_t>> copies;
};

struct Mxfp4Pool {
    int64_t rows, cols;
    std::vector<std::vector<uint8_t>> packed, scales;
};

// Enough copies of a matrix that cycling through them always misses the caches.
int64_t copies_for(int64_t bytes, bool quick) {
    const int64_t pool = quick ? (int64_t{128} << 20) : (int64_t{512} << 20);
    return std::max<int64_t>(2, (pool + bytes - 1) / bytes);
}

Bf16Pool make_bf16_pool(int64_t rows, int64_t cols, bool quick) {
    Bf16Pool p{rows, cols, {}};
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.05f);
    std::vector<uint16_t> m(rows * cols);
    for (auto& h : m) h = f32_to_bf16(dist(rng));
    const int64_t n = copies_for(rows * cols * 2, quick);
    for (int64_t i = 0; i < n; ++i) p.copies.push_back(m);
    return p;
}

Mxfp4Pool make_mxfp4_pool(int64_t rows, int64_t cols, bool quick) {
    Mxfp4Pool p{rows, cols, {}, {}};
    std::mt19937 rng(2);
    std::uniform_int_distribution<int> byte(0, 255), scale(118, 130);
    std::vector<uint8_t> packed(rows * cols / 2), scales(rows * cols / 32);
    for (auto& b : packed) b = static_cast<uint8_t>(byte(rng));
    for (auto& s : scales) s = static_cast<uint8_t>(scale(rng));
    const int64_t n = copies_for(rows * cols / 2 + rows * cols / 32, quick);
    for (int64_t i = 0; i < n; ++i) {
        p.packed.push_back(packed);
        p.scales.push_back(scales);
    }
    return p;
}

// How much faster one matmul over T tokens is than T matvec calls (CPU time, 2 threads).
std::string speedup_note(const Timing& matmul, const Timing& matvec, int64_t T) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " | %.1fx faster than %lld matvecs", T * matvec.cpu / matmul.cpu, (long long)T);
    return buf;
}

// One result line: weight GB/s by wall clock and by CPU time, each as a ratio to the
// bandwidth measured the same way with the same thread count.
void print_row(const char* kernel, const char* shape, const char* isa, int threads, double bytes, const Timing& t,
               const Bandwidth& bw, const std::string& extra = "") {
    const double wall = bytes / t.wall / 1e9, cpu = bytes / t.cpu / 1e9;
    std::printf("%-17s %-18s %-7s %d thr | wall %7.2f GB/s ratio %.2f | cpu %7.2f GB/s ratio %.2f%s\n", kernel, shape,
                isa, threads, wall, wall / bw.wall, cpu, cpu / bw.cpu, extra.c_str());
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
    if (argc > 1 && !quick) {
        std::printf("usage: bench_kernels [--quick]\n");
        return std::string(argv[1]) == "--help" ? 0 : 2;
    }
    Helper helper;
    g_helper = &helper;
    const double min_seconds = quick ? 0.1 : 0.3;

    const Bandwidth bw1 = measure_bandwidth(1, quick), bw2 = measure_bandwidth(2, quick);
    std::printf("memory read bandwidth (streaming fp32 sum over %s):\n", quick ? "256 MiB" : "1 GiB");
    std::printf("  1 thread  wall %6.2f GB/s  cpu %6.2f GB/s\n", bw1.wall, bw1.cpu);
    std::printf("  2 threads wall %6.2f GB/s  cpu %6.2f GB/s\n", bw2.wall, bw2.cpu);
    std::printf("best kernel set on this CPU: %s\n\n", select_kernels().name);

    std::vector<const Kernels*> sets{&scalar_kernels()};
    if (const Kernels* k = avx2_kernels()) sets.push_back(k);
    if (const Kernels* k = avx512_kernels()) sets.push_back(k);
    if (const Kernels* k = neon_kernels()) sets.push_back(k);

    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int64_t T = 8;  // tokens per matmul call
    std::vector<float> x(T * 8192), y(T * 8192);
    for (auto& v : x) v = dist(rng);

    struct Shape {
        int64_t rows, cols;
        const char* what;
    };
    // bf16: matvec with 1 and 2 threads; matmul over T tokens with 2 threads (weight bytes per
    // call are the same, so a ratio near the matvec one means W streamed once for all T tokens).
    const Shape bf16_shapes[] = {{2048, 2048, "k3-mini 2048x2048"}, {7168, 7168, "K3 7168x7168"}};
    for (const Shape& s : bf16_shapes) {
        Bf16Pool pool = make_bf16_pool(s.rows, s.cols, quick);
        const double bytes = s.rows * s.cols * 2.0;
        auto weights = [&](int64_t i) { return pool.copies[i % pool.copies.size()].data(); };
        for (const Kernels* k : sets) {
            const bool scalar = std::string(k->name) == "scalar";  // far from the limit: 1 thread shows it
            Timing matvec2{};
            for (int threads : {1, 2}) {
                if (scalar && threads == 2) continue;
                const Timing t = time_per_call(
                    [&](int64_t i) {
                        const uint16_t* W = weights(i);
                        return split_rows(threads, s.rows, [&](int64_t r0, int64_t n) {
                            k->matvec_bf16(W + r0 * s.cols, x.data(), y.data() + r0, n, s.cols);
                        });
                    },
                    min_seconds);
                print_row("matvec_bf16", s.what, k->name, threads, bytes, t, threads == 1 ? bw1 : bw2);
                matvec2 = t;
            }
            if (scalar) continue;
            const Timing t = time_per_call(
                [&](int64_t i) {
                    const uint16_t* W = weights(i);
                    return split_rows(2, s.rows, [&](int64_t r0, int64_t n) {
                        // each thread's rows go to its own [T][n] block of y
                        k->matmul_bf16(W + r0 * s.cols, x.data(), y.data() + T * r0, n, s.cols, T);
                    });
                },
                min_seconds);
            print_row("matmul_bf16 T=8", s.what, k->name, 2, bytes, t, bw2, speedup_note(t, matvec2, T));
        }
    }

    const Shape mx_shapes[] = {{768, 1024, "k3-mini 768x1024"}, {3072, 3584, "K3 3072x3584"}};
    for (const Shape& s : mx_shapes) {
        Mxfp4Pool pool = make_mxfp4_pool(s.rows, s.cols, quick);
        const double bytes = s.rows * s.cols / 2.0 + s.rows * s.cols / 32.0;
        for (const Kernels* k : sets) {
            const bool scalar = std::string(k->name) == "scalar";
            Timing matvec2{};
            for (int threads : {1, 2}) {
                if (scalar && threads == 2) continue;
                const Timing t = time_per_call(
                    [&](int64_t i) {
                        const uint8_t* P = pool.packed[i % pool.packed.size()].data();
                        const uint8_t* S = pool.scales[i % pool.scales.size()].data();
                        return split_rows(threads, s.rows, [&](int64_t r0, int64_t n) {
                            k->matvec_mxfp4(P + r0 * s.cols / 2, S + r0 * s.cols / 32, x.data(), y.data() + r0, n,
                                            s.cols);
                        });
                    },
                    min_seconds);
                print_row("matvec_mxfp4", s.what, k->name, threads, bytes, t, threads == 1 ? bw1 : bw2);
                matvec2 = t;
            }
            if (scalar) continue;
            const Timing t = time_per_call(
                [&](int64_t i) {
                    const uint8_t* P = pool.packed[i % pool.packed.size()].data();
                    const uint8_t* S = pool.scales[i % pool.scales.size()].data();
                    return split_rows(2, s.rows, [&](int64_t r0, int64_t n) {
                        k->matmul_mxfp4(P + r0 * s.cols / 2, S + r0 * s.cols / 32, x.data(), y.data() + T * r0, n,
                                        s.cols, T);
                    });
                },
                min_seconds);
            print_row("matmul_mxfp4 T=8", s.what, k->name, 2, bytes, t, bw2, speedup_note(t, matvec2, T));
        }
    }

    // Compute-bound kernels: time per call, ratio = scalar time / this time (CPU time, 1 thread).
    std::printf("\ncompute-bound kernels, 1 thread (ratio = speed-up over the scalar set):\n");
    {
        const int D = 128;
        std::vector<float> S(D * D), q(D), kk(D), v(D), alpha(D, 0.9f), o(D);
        for (auto& e : S) e = dist(rng) * 0.1f;
        for (int i = 0; i < D; ++i) {
            q[i] = dist(rng) * 0.1f;
            kk[i] = dist(rng) * 0.1f;
            v[i] = dist(rng);
        }
        double scalar_t = 0;
        for (const Kernels* k : sets) {
            const Timing t = time_per_call(
                [&](int64_t) {
                    return split_rows(1, 1, [&](int64_t, int64_t) {
                        k->kda_step(S.data(), q.data(), kk.data(), v.data(), alpha.data(), 0.5f, o.data(), D);
                    });
                },
                min_seconds);
            if (k == sets[0]) scalar_t = t.cpu;
            std::printf("%-17s %-18s %-7s 1 thr | cpu %9.2f us/call  ratio %.1f\n", "kda_step", "D=128", k->name,
                        t.cpu * 1e6, scalar_t / t.cpu);
        }
    }
    {
        const int64_t n_pos = 1024;
        const int dk = 576, dv = 512;  // K3 MLA with the latent cached: 512 + 64 rope
        std::vector<float> q(dk), keys(n_pos * dk), vals(n_pos * dv), out(dv), scratch(kAttendBlock);
        for (auto& e : q) e = dist(rng);
        for (auto& e : keys) e = dist(rng);
        for (auto& e : vals) e = dist(rng);
        double scalar_t = 0;
        for (const Kernels* k : sets) {
            const Timing t = time_per_call(
                [&](int64_t) {
                    return split_rows(1, 1, [&](int64_t, int64_t) {
                        attend_head(*k, q.data(), keys.data(), dk, vals.data(), dv, n_pos, dk, dv, 0.07f, out.data(),
                                       scratch.data());
                    });
                },
                min_seconds);
            if (k == sets[0]) scalar_t = t.cpu;
            std::printf("%-17s %-18s %-7s 1 thr | cpu %9.2f us/call  ratio %.1f\n", "attend_head", "1024 pos 576/512",
                        k->name, t.cpu * 1e6, scalar_t / t.cpu);
        }
    }
    return 0;
}
