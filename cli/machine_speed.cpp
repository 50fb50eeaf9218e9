// Measuring this machine's read, memory and matmul speed (machine_speed.h).
#include "cli/machine_speed.h"
#include "cli/timed_passes.h"

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
#include "util/check.h"

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


std::vector<float> attention_rows(int64_t n_keys, int dk) {
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.5f);
    std::vector<float> rows(size_t(n_keys * dk));
    const size_t drawn = size_t(std::min<int64_t>(n_keys, 1024) * dk);
    for (size_t i = 0; i < drawn; ++i) rows[i] = dist(rng);
    for (size_t i = drawn; i < rows.size(); ++i) rows[i] = rows[i % drawn];
    return rows;
}

void attend_tile(const Kernels& k, const float* Q, int dk, int dv, const float* rows, int64_t n_keys, float* out,
                 int tile) {
    K3_CHECK(tile >= 1 && tile <= kAttentionTile, "attention tile of %d queries outside 1..%d", tile, kAttentionTile);
    float m[kAttentionTile], l[kAttentionTile], scratch[kAttentionTile * kAttendBlock];
    int32_t n_valid[kAttentionTile];
    for (int i = 0; i < tile; ++i) m[i] = -INFINITY, l[i] = 0.0f, n_valid[i] = kAttendBlock;
    std::fill(out, out + tile * dv, 0.0f);
    for (int64_t b0 = 0; b0 < n_keys; b0 += kAttendBlock)
        k.attend_block(Q, dk, tile, n_valid, &rows[size_t(b0 * dk)], dk, &rows[size_t(b0 * dk)], dk, dk, dv, 0.1f, m, l,
                       out, dv, scratch);
}

double measure_attention_gflops(int threads, int dk, int dv, double seconds, int64_t n_keys) {
    // Tiles over the cached rows, the queries spread over the threads as in a prefill chunk (four
    // tiles a thread over 1024 keys, one over more: a pass over 32k K3 rows is already 4.6 GFLOP
    // a tile).
    const int64_t tiles = (n_keys <= 1024 ? 4 : 1) * std::max(1, threads), tile = kAttentionTile;
    const std::vector<float> rows = attention_rows(n_keys, dk);
    std::mt19937 rng(2);
    std::normal_distribution<float> dist(0.0f, 0.5f);
    std::vector<float> Q(size_t(tiles * tile * dk));
    for (float& v : Q) v = dist(rng);
    std::vector<float> acc(size_t(tiles * tile * dv));
    Compute cp(select_kernels(), std::max(1, threads));
    auto pass = [&] {
        cp.parallel_for(tiles, [&](int64_t t, int) {
            attend_tile(cp.k, &Q[size_t(t * tile * dk)], dk, dv, rows.data(), n_keys, &acc[size_t(t * tile * dv)]);
        });
    };
    return attention_flops_per_pair(dk, dv) * double(tiles * tile * n_keys) * passes_per_second(seconds, pass) / 1e9;
}


namespace {

// One look at every rate of measure_model_rates, for about `seconds`.
ModelRates model_rates_once(const ModelConfig& c, int threads, double seconds) {
    ModelRates r;
    // One thread: chunk_compute spreads the work by the parallel speedup measured with the token
    // work and charges each parallel region's join (token_work.h).
    Compute cp(select_kernels(), 1);
    std::mt19937 rng(3);
    // bf16: [rows][cols] over 64 tokens (the kernels' token tile, kernel_sets.h), rows as many as
    // the model's products of that width have, up to 32 MB of weights.
    const int64_t T = 64;
    cp.reserve(T);
    r.work = measure_token_work(c, threads, 0.4 * seconds);
    if (c.kv_lora_rank > 0) {
        for (const int64_t keys : kAttentionKeys)
            r.attention_gflops_by_keys.push_back(
                {keys, measure_attention_gflops(1, c.kv_lora_rank + c.qk_rope_head_dim, c.kv_lora_rank,
                                                0.1 * seconds / double(std::size(kAttentionKeys)), keys)});
        r.attention_gflops = r.attention_gflops_by_keys.front().second;
    }
    const auto widths = bf16_product_widths(c);
    for (const auto& [cols, most_rows] : widths) {
        const int64_t rows = std::clamp<int64_t>(most_rows, 16, std::max<int64_t>(16, (int64_t(16) << 20) / cols)) / 16 * 16;
        std::vector<uint16_t> W(size_t(rows * cols));
        for (auto& w : W) w = uint16_t(0x3c00 + (rng() & 0x3ff));
        std::vector<float> X(size_t(T * cols), 0.5f), Y(size_t(T * rows));
        const double per_s = passes_per_second(0.35 * seconds / double(widths.size()),
                                               [&] { cp.matmul_bf16(W.data(), X.data(), Y.data(), rows, cols, T); });
        r.bf16_gflops.push_back({cols, 2.0 * double(rows * cols * T) * per_s / 1e9});
    }
    // Experts: a chunk's tokens spread over the experts, top-k each (K3's router is near-flat); the
    // gate projection [I][L], MXFP4, of one expert after another through 64 MB of them, so that
    // each expert's weights come from memory as a chunk's walk over the pool has them come.
    if (c.num_experts > 0 && c.moe_intermediate_size > 0 && c.routed_expert_hidden_size > 0) {
        const int64_t I = c.moe_intermediate_size, L = c.routed_expert_hidden_size, bytes = I * L / 2;
        const int64_t n_experts = std::max<int64_t>(4, ((int64_t(64) << 20) + bytes - 1) / bytes);
        std::vector<uint8_t> packed(size_t(n_experts * bytes)), scales(size_t(n_experts * I * L / 32), 120);
        for (auto& b : packed) b = uint8_t(rng());
        for (const int64_t per_expert : {8, 16, 32, 64}) {
            std::vector<float> X(size_t(per_expert * L), 0.25f), Y(size_t(per_expert * I));
            int64_t e = 0;  // a pass: the next expert of the walk
            const double per_s = passes_per_second(0.15 * seconds / 4, [&] {
                cp.k.matmul_mxfp4(&packed[size_t(e * bytes)], &scales[size_t(e * I * L / 32)], X.data(), Y.data(), I, L,
                                  per_expert);
                e = (e + 1) % n_experts;
            });
            r.expert_gflops.push_back({per_expert, 2.0 * double(I * L * per_expert) * per_s / 1e9});
        }
    }
    return r;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

// Three looks, a figure's median: the other jobs of a shared machine come and go by the second,
// and one look at 0.1 s can land in a burst (demo-64k's rates measured 2x apart a minute apart
// at load 11-13).
ModelRates measure_model_rates(const ModelConfig& c, int threads, double seconds) {
    constexpr int kLooks = 3;
    std::vector<ModelRates> looks;
    for (int i = 0; i < kLooks; ++i) looks.push_back(model_rates_once(c, threads, seconds / kLooks));
    ModelRates r = looks[0];
    auto of = [&](auto&& figure) {
        std::vector<double> v;
        for (ModelRates& l : looks) v.push_back(figure(l));
        return median(v);
    };
    for (size_t i = 0; i < r.bf16_gflops.size(); ++i) r.bf16_gflops[i].second = of([&](ModelRates& l) { return l.bf16_gflops[i].second; });
    for (size_t i = 0; i < r.expert_gflops.size(); ++i)
        r.expert_gflops[i].second = of([&](ModelRates& l) { return l.expert_gflops[i].second; });
    r.attention_gflops = of([](ModelRates& l) { return l.attention_gflops; });
    for (size_t i = 0; i < r.attention_gflops_by_keys.size(); ++i)
        r.attention_gflops_by_keys[i].second = of([&](ModelRates& l) { return l.attention_gflops_by_keys[i].second; });
    for (double TokenWork::*f : {&TokenWork::mix_source_seconds, &TokenWork::norm_seconds, &TokenWork::kda_head_seconds,
                                 &TokenWork::route_seconds, &TokenWork::mla_head_seconds, &TokenWork::combine_seconds,
                                 &TokenWork::situ_seconds, &TokenWork::add_seconds, &TokenWork::join_seconds,
                                 &TokenWork::parallel_speedup})
        r.work.*f = of([&](ModelRates& l) { return l.work.*f; });
    return r;
}

}  // namespace k3::cli
