// Kernel speed against this machine's memory read bandwidth, both measured in the same run.
//
//   build/tests/bench/bench_kernels [--quick] [--prefill] [--attention]
//   (--prefill: the prefill shapes only; --attention: the prefill attention only)
//
// First a streaming fp32 sum over a 1 GiB buffer (1 and 2 threads) gives the read bandwidth.
// Then every kernel set this CPU runs is timed on K3-like and k3-mini-like shapes, with the
// weights spread over a pool of copies bigger than the last-level cache so every call streams
// from DRAM, as decode does. Effective GB/s = weight bytes / time; ratio = that / bandwidth with
// the same thread count (1.0 = the kernel reads weights as fast as memory delivers them).
// Two threads split the rows, as the engine does.
//
// Then prefill shapes: matmul over 16-256 tokens (bf16 and MXFP4, K3 and k3-mini shapes) in
// GFLOP/s (2 x rows x cols x tokens per call), each against the fp32 FMA peak this run measures
// with the same threads (independent register fma chains of the widest ISA the CPU has):
// ratio 1.0 = the kernel does nothing but multiply-adds at full width. Then the prefill's MLA
// attention (attend_block as mla.cpp calls it) at K3's widths over 1k, 8k and 32k cached rows,
// against the same peak (docs/performance.md, "Attention at long context").
//
// Each figure is given twice: by wall clock, and by the CPU time of the busiest of our threads
// (threads wait on a condition variable, so waiting costs no CPU time). On a dedicated machine
// the two agree; on a shared one the CPU-time figure is what the kernel does while it runs,
// and the wall-clock one includes time other processes took. Compare ratios, not absolutes.
#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

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

#include "cli/machine_speed.h"
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
volatile float g_sink = 0;  // keeps the peak loops' results alive

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

// fp32 FMA peak of one thread: 12 independent chains (more than latency x ports on current
// cores), each fma 2 flops per lane. Built for the widest ISA the CPU has, chosen at run time.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) double fma_flops_avx512(int64_t iters) {
    __m512 a[12];
    for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(float(i) * 1e-3f);
    const __m512 m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-4f);
    for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12  // the chains in registers, not an array in memory
        for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
    }
    __m512 s = a[0];
    for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
    float lanes[16];
    _mm512_storeu_ps(lanes, s);
    for (float v : lanes) g_sink = g_sink + v;
    return double(iters) * 12 * 16 * 2;
}

__attribute__((target("avx2,fma"))) double fma_flops_avx2(int64_t iters) {
    __m256 a[12];
    for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(float(i) * 1e-3f);
    const __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-4f);
    for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12  // the chains in registers, not an array in memory
        for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
    }
    float lanes[8];
    __m256 s = a[0];
    for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
    _mm256_storeu_ps(lanes, s);
    for (float v : lanes) g_sink = g_sink + v;
    return double(iters) * 12 * 8 * 2;
}

const char* fma_isa() {
    if (__builtin_cpu_supports("avx512f")) return "avx512";
    return __builtin_cpu_supports("fma") ? "avx2" : "none";
}

double fma_flops(int64_t iters) {
    return __builtin_cpu_supports("avx512f") ? fma_flops_avx512(iters) : fma_flops_avx2(iters);
}
#elif defined(__aarch64__)
const char* fma_isa() { return "neon"; }

double fma_flops(int64_t iters) {
    float32x4_t a[12];
    for (int i = 0; i < 12; ++i) a[i] = vdupq_n_f32(float(i) * 1e-3f);
    const float32x4_t m = vdupq_n_f32(0.999f), c = vdupq_n_f32(1e-4f);
    for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12  // the chains in registers, not an array in memory
        for (int i = 0; i < 12; ++i) a[i] = vfmaq_f32(c, a[i], m);
    }
    for (int i = 0; i < 12; ++i) g_sink = g_sink + vaddvq_f32(a[i]);
    return double(iters) * 12 * 4 * 2;
}
#else
const char* fma_isa() { return "none"; }
double fma_flops(int64_t) { return 0; }
#endif

struct Peak {
    double wall, cpu;  // GFLOP/s
    const char* isa;
};

// The fp32 FMA peak with `threads` threads, by wall clock and by the busiest thread's CPU time.
Peak measure_fma_peak(int threads) {
    const char* isa = fma_isa();
    if (std::string(isa) == "none") return {0, 0, isa};
    const int64_t iters = 1 << 20;
    double flops = 0;
    const Timing t = time_per_call(
        [&](int64_t) {
            return split_rows(threads, threads, [&](int64_t, int64_t) { flops = fma_flops(iters); });
        },
        0.3, 5);
    return {flops * threads / t.wall / 1e9, flops * threads / t.cpu / 1e9, isa};
}

// Prefill: one matmul over T tokens of a chunk, 2 threads splitting the rows, weights from a
// pool bigger than the caches (a chunk streams each weight once per layer). GFLOP/s against
// the 2-thread FMA peak, by CPU time (the figure a busy machine disturbs least) and wall clock.
// The 1- and 2-thread FMA peaks, printed; the 2-thread one returned.
Peak print_fma_peaks() {
    const Peak peak = measure_fma_peak(2), peak1 = measure_fma_peak(1);
    std::printf("\nthe fp32 FMA peak (%s, independent fma chains):\n", peak.isa);
    std::printf("  peak 1 thread  wall %7.1f GFLOP/s  cpu %7.1f GFLOP/s\n", peak1.wall, peak1.cpu);
    std::printf("  peak 2 threads wall %7.1f GFLOP/s  cpu %7.1f GFLOP/s\n", peak.wall, peak.cpu);
    return peak;
}

void prefill_matmuls(const std::vector<const Kernels*>& sets, bool quick, double min_seconds, const Peak& peak) {
    std::printf("\nprefill matmuls, 2 threads, against the 2-thread peak:\n");
    if (peak.cpu <= 0) return;
    std::mt19937 rng(4);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int64_t max_T = 256;
    struct Shape {
        int64_t rows, cols;
        bool mxfp4;
        const char* what;
    };
    // K3: the MLA q_b/o-sized bf16 trunk matrix and one routed expert's gate/up (MXFP4);
    // k3-mini: its trunk matrix and its expert
    const Shape shapes[] = {{2048, 2048, false, "k3-mini 2048x2048"},
                            {7168, 7168, false, "K3 7168x7168"},
                            {768, 1024, true, "k3-mini 768x1024"},
                            {3072, 3584, true, "K3 3072x3584"}};
    std::vector<float> x(size_t(max_T * 7168)), y(size_t(max_T * 7168));
    for (auto& v : x) v = dist(rng);
    for (const Shape& s : shapes) {
        Bf16Pool bf;
        Mxfp4Pool mx;
        if (s.mxfp4)
            mx = make_mxfp4_pool(s.rows, s.cols, quick);
        else
            bf = make_bf16_pool(s.rows, s.cols, quick);
        for (const Kernels* k : sets) {
            if (std::string(k->name) == "scalar") continue;  // far from the peak by design
            for (int64_t T : {16, 32, 64, 128, 256}) {
                const Timing t = time_per_call(
                    [&](int64_t i) {
                        return split_rows(2, s.rows, [&](int64_t r0, int64_t n) {
                            if (s.mxfp4) {
                                const uint8_t* P = mx.packed[size_t(i) % mx.packed.size()].data();
                                const uint8_t* S = mx.scales[size_t(i) % mx.scales.size()].data();
                                k->matmul_mxfp4(P + r0 * s.cols / 2, S + r0 * s.cols / 32, x.data(), y.data() + T * r0,
                                                n, s.cols, T);
                            } else {
                                const uint16_t* W = bf.copies[size_t(i) % bf.copies.size()].data();
                                k->matmul_bf16(W + r0 * s.cols, x.data(), y.data() + T * r0, n, s.cols, T);
                            }
                        });
                    },
                    min_seconds);
                const double flops = 2.0 * double(s.rows) * double(s.cols) * double(T);
                std::printf("%-13s %-18s %-7s T=%-3lld | wall %7.1f GFLOP/s %4.0f%% | cpu %7.1f GFLOP/s %4.0f%% of peak\n",
                            s.mxfp4 ? "matmul_mxfp4" : "matmul_bf16", s.what, k->name, (long long)T,
                            flops / t.wall / 1e9, 100 * flops / t.wall / 1e9 / peak.wall, flops / t.cpu / 1e9,
                            100 * flops / t.cpu / 1e9 / peak.cpu);
                std::fflush(stdout);
            }
        }
    }
}

// Prefill attention: MLA's blocked attention at K3's widths (the cached latent and rope, 576
// wide, the values its first 512) over n cached rows in blocks of kAttendBlock keys, each of 2
// threads its own tile of queries: mla.cpp's tile (cli::kAttentionTile), and 16 queries, the
// tile before it, for comparison. GFLOP/s (2 x (576 + 512) a query and a key) against the
// 2-thread FMA peak; past the caches (K3: 2.3 kB a row, 19 MB at 8k, 75 MB at 32k) every tile
// streams the rows from memory, once per tile, so the smaller tile waits on memory more.
void prefill_attention(const std::vector<const Kernels*>& sets, double min_seconds, const Peak& peak) {
    std::printf("\nprefill attention (MLA, K3 widths 576/512, tiles of %d queries as mla.cpp, and of 16), 2 threads, "
                "against the 2-thread peak:\n",
                cli::kAttentionTile);
    if (peak.cpu <= 0) return;
    const int dk = 576, dv = 512, max_tile = cli::kAttentionTile, threads = 2;
    const int64_t max_keys = 32768;
    const std::vector<float> rows = cli::attention_rows(max_keys, dk);
    std::mt19937 rng(5);
    std::normal_distribution<float> dist(0.0f, 0.5f);
    std::vector<float> Q(size_t(threads * max_tile * dk)), out(size_t(threads * max_tile * dv));
    for (float& v : Q) v = dist(rng);
    for (const Kernels* k : sets) {
        if (std::string(k->name) == "scalar") continue;  // far from the peak by design
        for (const int tile : {max_tile, 16}) {
            for (const int64_t n_keys : {int64_t(1024), int64_t(8192), max_keys}) {
                const Timing t = time_per_call(
                    [&](int64_t) {
                        return split_rows(threads, threads, [&](int64_t t0, int64_t nt) {
                            for (int64_t q = t0; q < t0 + nt; ++q)
                                cli::attend_tile(*k, &Q[size_t(q * tile * dk)], dk, dv, rows.data(), n_keys,
                                                 &out[size_t(q * tile * dv)], tile);
                        });
                    },
                    min_seconds);
                const double flops = 2.0 * (dk + dv) * double(threads * tile) * double(n_keys);
                const std::string shape = "576/512, " + std::to_string(tile) + " q";
                std::printf("%-13s %-18s %-7s %5lldk | wall %7.1f GFLOP/s %4.0f%% | cpu %7.1f GFLOP/s %4.0f%% of peak\n",
                            "attend_block", shape.c_str(), k->name, (long long)(n_keys / 1024), flops / t.wall / 1e9,
                            100 * flops / t.wall / 1e9 / peak.wall, flops / t.cpu / 1e9,
                            100 * flops / t.cpu / 1e9 / peak.cpu);
                std::fflush(stdout);
            }
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false, prefill_only = false, attention_only = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--quick") {
            quick = true;
        } else if (a == "--prefill") {
            prefill_only = true;
        } else if (a == "--attention") {
            attention_only = true;
        } else {
            std::printf("usage: bench_kernels [--quick] [--prefill] [--attention]\n");
            return a == "--help" ? 0 : 2;
        }
    }
    Helper helper;
    g_helper = &helper;
    const double min_seconds = quick ? 0.1 : 0.3;

    std::vector<const Kernels*> sets;  // every set of the table this machine runs, scalar first
    for (const KernelSet& set : kernel_sets())
        if (const Kernels* k = set.usable()) sets.push_back(k);
    if (prefill_only || attention_only) {
        const Peak peak = print_fma_peaks();
        if (!attention_only) prefill_matmuls(sets, quick, min_seconds, peak);
        prefill_attention(sets, min_seconds, peak);
        return 0;
    }

    const Bandwidth bw1 = measure_bandwidth(1, quick), bw2 = measure_bandwidth(2, quick);
    std::printf("memory read bandwidth (streaming fp32 sum over %s):\n", quick ? "256 MiB" : "1 GiB");
    std::printf("  1 thread  wall %6.2f GB/s  cpu %6.2f GB/s\n", bw1.wall, bw1.cpu);
    std::printf("  2 threads wall %6.2f GB/s  cpu %6.2f GB/s\n", bw2.wall, bw2.cpu);
    std::printf("best kernel set on this CPU: %s\n\n", select_kernels().name);

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
    const Peak peak = print_fma_peaks();
    prefill_matmuls(sets, quick, min_seconds, peak);
    prefill_attention(sets, min_seconds, peak);
    return 0;
}
