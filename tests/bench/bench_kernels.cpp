// Kernel speed against this machine's memory read bandwidth, both measured in the same run.
//
//   build/tests/bench/bench_kernels [--quick]
//
// First a streaming fp32 sum over a 1 GiB buffer (1 and 2 threads) gives the read bandwidth.
// Then every kernel set this CPU runs is timed on K3-like and k3-mini-like shapes, with the
// weights spread over a pool of copies bigger than the last-level cache so every call streams
// from DRAM, as decode does. Effective GB/s = weight bytes / time; ratio = that / bandwidth with
// the same thread count (1.0 = the kernel reads weights as fast as memory delivers them).
// Two threads split the rows, as the engine does. Figures are noisy on a shared machine: run
// it twice and compare ratios, not absolute numbers.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"

using namespace k3;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Best-of-`reps` seconds per call of fn(i), each rep running enough calls to last ~min_seconds.
double time_per_call(const std::function<void(int64_t)>& fn, double min_seconds, int reps = 3) {
    fn(0);  // warm-up
    int64_t calls = 1;
    for (;;) {
        const auto t0 = Clock::now();
        for (int64_t i = 0; i < calls; ++i) fn(i);
        if (seconds_since(t0) >= min_seconds / 4 || calls > (int64_t{1} << 30)) break;
        calls *= 2;
    }
    calls *= 4;  // about min_seconds per rep
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        for (int64_t i = 0; i < calls; ++i) fn(i);
        best = std::min(best, seconds_since(t0) / calls);
    }
    return best;
}

// Streaming read of the whole buffer split over `threads` threads; 16 independent partial
// sums so the adds vectorise without reassociation and the loop is load-bound.
double stream_sum(const float* buf, int64_t n, int threads) {
    double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
        const int nt = omp_get_num_threads(), id = omp_get_thread_num();
        const int64_t per = (n / nt) & ~int64_t{15};
        const int64_t begin = id * per, end = (id == nt - 1) ? (n & ~int64_t{15}) : begin + per;
        float acc[16] = {};
        for (int64_t i = begin; i < end; i += 16)
            for (int l = 0; l < 16; ++l) acc[l] += buf[i + l];
        for (float a : acc) total += a;
    }
    return total;
}

double measure_bandwidth(int threads, bool quick) {
    const int64_t n = (quick ? (int64_t{256} << 20) : (int64_t{1} << 30)) / 4;
    std::vector<float> buf(n);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i & 1023);  // touch on the threads that read
    volatile double sink = 0;
    const double s = time_per_call([&](int64_t) { sink = sink + stream_sum(buf.data(), n, threads); }, 0.5, 5);
    return n * 4.0 / s / 1e9;
}

// Splits rows [0, rows) between `threads` threads and calls fn(row0, nrows) on each.
void split_rows(int threads, int64_t rows, const std::function<void(int64_t, int64_t)>& fn) {
    if (threads == 1) return fn(0, rows);
#pragma omp parallel num_threads(threads)
    {
        const int nt = omp_get_num_threads(), id = omp_get_thread_num();
        const int64_t r0 = rows * id / nt, r1 = rows * (id + 1) / nt;
        fn(r0, r1 - r0);
    }
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

struct Row {
    std::string kernel, shape, isa;
    int threads;
    double gbps, ratio;
};

void print_row(const Row& r) {
    std::printf("%-14s %-18s %-7s %d thr  %7.2f GB/s  ratio %.2f\n", r.kernel.c_str(), r.shape.c_str(),
                r.isa.c_str(), r.threads, r.gbps, r.ratio);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
    if (argc > 1 && !quick) {
        std::printf("usage: bench_kernels [--quick]\n");
        return std::string(argv[1]) == "--help" ? 0 : 2;
    }
    const double min_seconds = quick ? 0.1 : 0.3;

    const double bw1 = measure_bandwidth(1, quick), bw2 = measure_bandwidth(2, quick);
    std::printf("memory read bandwidth (streaming fp32 sum, %s): 1 thread %.2f GB/s, 2 threads %.2f GB/s\n",
                quick ? "256 MiB" : "1 GiB", bw1, bw2);
    std::printf("best kernel set on this CPU: %s\n\n", select_kernels().name);

    std::vector<const Kernels*> sets{&scalar_kernels()};
    if (const Kernels* k = avx2_kernels()) sets.push_back(k);
    if (const Kernels* k = avx512_kernels()) sets.push_back(k);

    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(64 * 8192), y(64 * 8192);
    for (auto& v : x) v = dist(rng);

    // ---- bf16 ----
    struct Shape {
        int64_t rows, cols;
        const char* what;
    };
    const Shape bf16_shapes[] = {{2048, 2048, "k3-mini 2048x2048"}, {7168, 7168, "K3 7168x7168"}};
    for (const Shape& s : bf16_shapes) {
        Bf16Pool pool = make_bf16_pool(s.rows, s.cols, quick);
        const double bytes = s.rows * s.cols * 2.0;
        for (const Kernels* k : sets) {
            for (int threads : {1, 2}) {
                const double bw = threads == 1 ? bw1 : bw2;
                // The scalar set is far from the limit; one thread is enough to show it.
                if (std::string(k->name) == "scalar" && threads == 2) continue;
                const double t = time_per_call(
                    [&](int64_t i) {
                        const uint16_t* W = pool.copies[i % pool.copies.size()].data();
                        split_rows(threads, s.rows, [&](int64_t r0, int64_t n) {
                            k->matvec_bf16(W + r0 * s.cols, x.data(), y.data() + r0, n, s.cols);
                        });
                    },
                    min_seconds);
                print_row({"matvec_bf16", s.what, k->name, threads, bytes / t / 1e9, bytes / t / 1e9 / bw});
            }
            // matmul over 8 tokens: weight bytes per call are the same, so GB/s x 8 is the
            // token-weight throughput; a ratio near 1 means W streams once for all 8 tokens.
            if (std::string(k->name) != "scalar") {
                const int64_t T = 8;
                const double t = time_per_call(
                    [&](int64_t i) {
                        const uint16_t* W = pool.copies[i % pool.copies.size()].data();
                        split_rows(2, s.rows, [&](int64_t r0, int64_t n) {
                            // Each thread's rows go to its own [T][n] block.
                            k->matmul_bf16(W + r0 * s.cols, x.data(), y.data() + T * r0, n, s.cols, T);
                        });
                    },
                    min_seconds);
                print_row({"matmul_bf16 T=8", s.what, k->name, 2, bytes / t / 1e9, bytes / t / 1e9 / bw2});
            }
        }
    }

    // ---- MXFP4 ----
    const Shape mx_shapes[] = {{768, 1024, "k3-mini 768x1024"}, {3072, 3584, "K3 3072x3584"}};
    for (const Shape& s : mx_shapes) {
        Mxfp4Pool pool = make_mxfp4_pool(s.rows, s.cols, quick);
        const double bytes = s.rows * s.cols / 2.0 + s.rows * s.cols / 32.0;
        for (const Kernels* k : sets) {
            for (int threads : {1, 2}) {
                const double bw = threads == 1 ? bw1 : bw2;
                if (std::string(k->name) == "scalar" && threads == 2) continue;
                const double t = time_per_call(
                    [&](int64_t i) {
                        const size_t c = i % pool.packed.size();
                        const uint8_t* P = pool.packed[c].data();
                        const uint8_t* S = pool.scales[c].data();
                        split_rows(threads, s.rows, [&](int64_t r0, int64_t n) {
                            k->matvec_mxfp4(P + r0 * s.cols / 2, S + r0 * s.cols / 32, x.data(), y.data() + r0, n,
                                            s.cols);
                        });
                    },
                    min_seconds);
                print_row({"matvec_mxfp4", s.what, k->name, threads, bytes / t / 1e9, bytes / t / 1e9 / bw});
            }
            if (std::string(k->name) != "scalar") {
                const int64_t T = 8;
                const double t = time_per_call(
                    [&](int64_t i) {
                        const size_t c = i % pool.packed.size();
                        const uint8_t* P = pool.packed[c].data();
                        const uint8_t* S = pool.scales[c].data();
                        split_rows(2, s.rows, [&](int64_t r0, int64_t n) {
                            k->matmul_mxfp4(P + r0 * s.cols / 2, S + r0 * s.cols / 32, x.data(), y.data() + T * r0,
                                            n, s.cols, T);
                        });
                    },
                    min_seconds);
                print_row({"matmul_mxfp4 T=8", s.what, k->name, 2, bytes / t / 1e9, bytes / t / 1e9 / bw2});
            }
        }
    }

    // ---- compute-bound kernels: time per call, ratio = scalar time / this time ----
    std::printf("\ncompute-bound kernels (ratio = speed-up over scalar, 1 thread):\n");
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
            const double t = time_per_call(
                [&](int64_t) { k->kda_step(S.data(), q.data(), kk.data(), v.data(), alpha.data(), 0.5f, o.data(), D); },
                min_seconds);
            if (k == sets[0]) scalar_t = t;
            std::printf("%-14s %-18s %-7s 1 thr  %7.2f us/call  ratio %.2f\n", "kda_step", "D=128", k->name, t * 1e6,
                        scalar_t / t);
        }
    }
    {
        const int64_t n_pos = 1024;
        const int dk = 576, dv = 512;  // K3 MLA with the latent cached: 512 + 64 rope
        std::vector<float> q(dk), keys(n_pos * dk), vals(n_pos * dv), out(dv), scratch(n_pos);
        for (auto& e : q) e = dist(rng);
        for (auto& e : keys) e = dist(rng);
        for (auto& e : vals) e = dist(rng);
        double scalar_t = 0;
        for (const Kernels* k : sets) {
            const double t = time_per_call(
                [&](int64_t) {
                    k->attend_head(q.data(), keys.data(), dk, vals.data(), dv, n_pos, dk, dv, 0.07f, out.data(),
                                   scratch.data());
                },
                min_seconds);
            if (k == sets[0]) scalar_t = t;
            std::printf("%-14s %-18s %-7s 1 thr  %7.2f us/call  ratio %.2f\n", "attend_head", "1024 pos 576/512",
                        k->name, t * 1e6, scalar_t / t);
        }
    }
    return 0;
}
