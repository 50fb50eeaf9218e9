// Measuring this machine's read, memory and matmul speed (machine_speed.h).
#include "cli/machine_speed.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "io/disk_bandwidth.h"
#include "io/file.h"
#include "io/read_pool.h"
#include "k3/error.h"
#include "kernels/kernels.h"
#include "k3/options.h"
#include "model/compute.h"
#include "store/streaming_store.h"
#include "util/aligned_bytes.h"

namespace k3::cli {

namespace {

// A scratch file under `dir` to measure when there are no model files to read.
std::filesystem::path write_scratch(const std::filesystem::path& dir, int64_t bytes) {
    std::filesystem::path p = dir / (".k3serve-doctor-" + std::to_string(::getpid()));
    std::ofstream out(p, std::ios::binary);
    if (!out) throw Error(ErrorKind::Io, "cannot write a scratch file in " + dir.string() + ": " + std::strerror(errno));
    std::vector<char> block(size_t(4) << 20);
    std::mt19937_64 rng(1);
    for (auto& c : block) c = char(rng());
    for (int64_t done = 0; done < bytes; done += int64_t(block.size())) out.write(block.data(), std::streamsize(block.size()));
    if (!out) throw Error(ErrorKind::Io, "cannot write a scratch file in " + dir.string() + " (disk full?)");
    return p;
}

// Runs `pass` until `seconds` have gone (after one warm-up pass): passes per second.
template <class F>
double passes_per_second(double seconds, F&& pass) {
    pass();
    int reps = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double s = 0;
    do {
        pass();
        ++reps;
        s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (s < seconds);
    return reps / s;
}

}  // namespace

Disk check_disk(const std::filesystem::path& dir, const std::vector<std::filesystem::path>& model_files, int64_t expert_bytes,
                double seconds, double given_gbps) {
    Disk d;
    d.dir = dir;
    struct statvfs sv {};
    if (::statvfs(dir.c_str(), &sv) == 0) d.free_bytes = int64_t(sv.f_bavail) * int64_t(sv.f_frsize);
    if (given_gbps > 0) {
        d.seq_gbps = d.expert_gbps = given_gbps;
        d.direct = true;
        d.note = "given with --disk-gbps";
        return d;
    }
    std::vector<std::filesystem::path> files = model_files;
    std::filesystem::path scratch;
    int64_t have = 0;
    for (const auto& f : files) have += int64_t(std::filesystem::file_size(f));
    if (have < (int64_t(256) << 20)) {
        // Too little model data to measure reads (or none yet): a scratch file, dropped afterwards.
        // Its pages are still in the page cache, which O_DIRECT bypasses.
        scratch = write_scratch(dir, int64_t(512) << 20);
        files = {scratch};
        d.note = "measured on a 512 MiB scratch file";
    } else {
        d.note = "measured on the model's files";
    }
    try {
        // The trunk's reads as the engine issues them: a layer run split into kReadChunk pieces on
        // kReaderThreads threads, landing one after another in a large arena (the ring). On this
        // project's virtual disk, 16 MiB reads at depth 4 into reused per-thread buffers
        // (diskbench's row) measured about 1.5 GB/s while the engine's trunk reads ran at 2-3
        // GB/s (docs/performance.md, "Planning a budget").
        io::BandwidthRun seq;
        seq.sequential = true;
        seq.depth = io::kReaderThreads;
        seq.block_bytes = io::kReadChunk;
        seq.arena_bytes = int64_t(512) << 20;
        seq.max_seconds = seconds;
        seq.max_bytes = int64_t(2) << 30;
        auto r = io::measure_bandwidth(files, seq);
        d.direct = r.direct_used;
        d.seq_gbps = r.mb_per_s() / 1e3;
        io::BandwidthRun rnd;
        rnd.sequential = false;
        rnd.depth = 16;
        rnd.block_bytes = std::max<int64_t>(expert_bytes, 4096);
        rnd.max_seconds = seconds;
        rnd.max_bytes = int64_t(1) << 30;
        d.expert_gbps = io::measure_bandwidth(files, rnd, 7).mb_per_s() / 1e3;
        d.measured = true;
    } catch (...) {
        if (!scratch.empty()) std::filesystem::remove(scratch);
        throw;
    }
    if (!scratch.empty()) std::filesystem::remove(scratch);
    return d;
}

// Reading memory with every core, the way a resident decode step sweeps the trunk: GB/s.
double measure_memory_gbps(double seconds) {
    const int64_t bytes = int64_t(256) << 20;
    AlignedBytes buf{static_cast<size_t>(bytes)};
    std::memset(buf.data(), 1, size_t(bytes));
    const int threads = std::max(1, physical_cores());
    const auto* words = reinterpret_cast<const uint64_t*>(buf.data());
    const int64_t n = bytes / 8;
    int64_t passes = 0;
    uint64_t sink = 0;
    auto t0 = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
        std::vector<std::thread> pool;
        std::vector<uint64_t> sums(size_t(threads), 0);
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([&, t] {
                uint64_t s = 0;
                for (int64_t i = n * t / threads; i < n * (t + 1) / threads; ++i) s += words[i];
                sums[size_t(t)] = s;
            });
        for (auto& th : pool) th.join();
        for (uint64_t s : sums) sink += s;
        ++passes;
        elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (elapsed < seconds);
    if (sink == 42) std::fputc(' ', stderr);  // keeps the sums alive
    return double(bytes) * double(passes) / elapsed / 1e9;
}

double measure_gflops(int threads, double seconds) {
    const int64_t rows = 2048, cols = 2048, T = 64;
    std::vector<uint16_t> W(size_t(rows * cols), 0x3c00);
    std::vector<float> X(size_t(T * cols), 0.5f), Y(size_t(T * rows));
    Compute cp(select_kernels(), std::max(1, threads));
    cp.reserve(T);
    cp.matmul_bf16(W.data(), X.data(), Y.data(), rows, cols, T);  // warm-up
    int reps = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double s = 0;
    do {
        cp.matmul_bf16(W.data(), X.data(), Y.data(), rows, cols, T);
        ++reps;
        s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (s < seconds);
    return 2.0 * double(rows * cols * T) * reps / s / 1e9;
}

double measure_attention_gflops(int threads, int dk, int dv, double seconds) {
    // Tiles of 16 queries (mla.cpp's largest) over 1024 cached rows in 64-key blocks, the
    // queries spread over the threads as in a prefill chunk.
    const int64_t n_keys = 1024, tiles = 4 * std::max(1, threads), tile = 16;
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.5f);
    std::vector<float> rows(size_t(n_keys * dk)), Q(size_t(tiles * tile * dk));
    for (float& v : rows) v = dist(rng);
    for (float& v : Q) v = dist(rng);
    std::vector<float> acc(size_t(tiles * tile * dv));
    Compute cp(select_kernels(), std::max(1, threads));
    auto pass = [&] {
        cp.parallel_for(tiles, [&](int64_t t, int) {
            float m[tile], l[tile], scratch[tile * kAttendBlock];
            int32_t n_valid[tile];
            for (int i = 0; i < tile; ++i) m[i] = -INFINITY, l[i] = 0.0f, n_valid[i] = kAttendBlock;
            float* out = &acc[size_t(t * tile * dv)];
            std::fill(out, out + tile * dv, 0.0f);
            for (int64_t b0 = 0; b0 < n_keys; b0 += kAttendBlock)
                cp.k.attend_block(&Q[size_t(t * tile * dk)], dk, int(tile), n_valid, &rows[size_t(b0 * dk)], dk,
                                  &rows[size_t(b0 * dk)], dk, dk, dv, 0.1f, m, l, out, dv, scratch);
        });
    };
    return attention_flops_per_pair(dk, dv) * double(tiles * tile * n_keys) * passes_per_second(seconds, pass) / 1e9;
}


ModelCompute measure_model_compute(const ModelConfig& c, int chunk_tokens, int threads, double seconds) {
    ModelCompute r;
    Compute cp(select_kernels(), std::max(1, threads));
    std::mt19937 rng(3);
    // Trunk: [rows][hidden] bf16 over the chunk's tokens, 64 at a time (the kernels' token tile,
    // kernel_sets.h); rows as many as a layer's widest product has, up to 32 MB of weights.
    const int64_t E = std::max(16, c.hidden_size);
    const int64_t widest = std::max<int64_t>({c.intermediate_size, c.shared_intermediate(), 4 * int64_t(c.kda_width()), 16});
    const int64_t rows = std::clamp<int64_t>(widest, 16, (int64_t(16) << 20) / E) / 16 * 16;
    const int64_t T = std::clamp(chunk_tokens, 1, 64);
    {
        std::vector<uint16_t> W(size_t(rows * E));
        for (auto& w : W) w = uint16_t(0x3c00 + (rng() & 0x3ff));
        std::vector<float> X(size_t(T * E), 0.5f), Y(size_t(T * rows));
        cp.reserve(T);
        const double per_s = passes_per_second(seconds / 3, [&] { cp.matmul_bf16(W.data(), X.data(), Y.data(), rows, E, T); });
        r.trunk_gflops = 2.0 * double(rows * E * T) * per_s / 1e9;
    }
    // Experts: a chunk's tokens spread over the experts, top-k each (K3's router is near-flat), as
    // many experts as there are threads to keep busy; the gate projection [I][L], MXFP4.
    if (c.num_experts > 0 && c.moe_intermediate_size > 0 && c.routed_expert_hidden_size > 0) {
        const int64_t I = c.moe_intermediate_size, L = c.routed_expert_hidden_size;
        const int64_t per_expert = std::clamp<int64_t>(
            int64_t(std::lround(double(chunk_tokens) * c.num_experts_per_token / c.num_experts)), 1, 64);
        const int64_t n_experts = 4 * std::max(1, threads);
        std::vector<uint8_t> packed(size_t(n_experts * I * L / 2)), scales(size_t(n_experts * I * L / 32), 120);
        for (auto& b : packed) b = uint8_t(rng());
        std::vector<float> X(size_t(per_expert * L), 0.25f), Y(size_t(n_experts * per_expert * I));
        const double per_s = passes_per_second(seconds / 3, [&] {
            cp.parallel_for(n_experts, [&](int64_t e, int) {
                cp.k.matmul_mxfp4(&packed[size_t(e * I * L / 2)], &scales[size_t(e * I * L / 32)], X.data(),
                                  &Y[size_t(e * per_expert * I)], I, L, per_expert);
            });
        });
        r.expert_gflops = 2.0 * double(n_experts * I * L * per_expert) * per_s / 1e9;
    }
    // KDA: delta-rule steps of one head, 64 tokens in a row (the recurrence is sequential), the
    // heads spread over the threads as kda.cpp spreads them.
    if (c.kda_head_dim > 0 && c.kda_num_heads > 0) {
        const int D = std::min(c.kda_head_dim, kKdaMaxHeadDim), kSteps = 64;
        const int heads = std::max(c.kda_num_heads, 2 * std::max(1, threads));
        std::normal_distribution<float> nd(0.0f, 0.1f);
        std::vector<float> S(size_t(heads) * size_t(D * D)), vec(size_t(4 * D)), o(size_t(heads * D));
        for (float& v : S) v = nd(rng);
        for (float& v : vec) v = nd(rng);
        // no decay (alpha 1): a state decayed pass after pass turns subnormal, and those run 3x slower
        for (int d = 0; d < D; ++d) vec[size_t(3 * D + d)] = 1.0f;
        const double per_s = passes_per_second(seconds / 3, [&] {
            cp.parallel_for(heads, [&](int64_t h, int) {
                for (int t = 0; t < kSteps; ++t)
                    cp.k.kda_step(&S[size_t(h * D * D)], vec.data(), vec.data() + D, vec.data() + 2 * D,
                                  vec.data() + 3 * D, 0.5f, &o[size_t(h * D)], D);
            });
        });
        r.kda_step_seconds = 1.0 / (per_s * heads * kSteps);
    }
    return r;
}

}  // namespace k3::cli
