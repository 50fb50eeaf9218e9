// How fast this machine reads and computes, measured the way the engine works: O_DIRECT reads
// of the model's files (sequential for the streamed trunk, expert-sized at random for cache
// misses), memory swept by every core, bf16 matmuls on the engine's kernels. `doctor` and
// `plan` feed these to the projection (projection.h).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/chunk_compute.h"
#include "weights/config.h"

namespace k3 {
struct Kernels;
}

namespace k3::cli {

struct Disk {
    std::filesystem::path dir;
    int64_t free_bytes = -1;
    double seq_gbps = 0;        // sequential reads as the trunk ring issues them (8 MiB pieces, depth 8)
    double expert_gbps = 0;     // expert-sized random reads at depth 16 (the expert cache misses)
    bool direct = false;        // O_DIRECT accepted on this filesystem
    bool measured = false;
    std::string note;
};

// Reads `model_files` (or, with under 256 MiB of them, a scratch file written in `dir` and
// removed) for up to `seconds` each way; `given_gbps` > 0 skips the measurement.
Disk check_disk(const std::filesystem::path& dir, const std::vector<std::filesystem::path>& model_files, int64_t expert_bytes,
                double seconds, double given_gbps);

// Reading memory with every core, the way a resident decode step sweeps the trunk: GB/s.
double measure_memory_gbps(double seconds);

// bf16 matmul throughput over a 64-token chunk on the engine's kernels: GFLOP/s.
double measure_gflops(int threads, double seconds);

// Blocked attention (kernels.h, attend_block) at a model's widths: dk-wide cached rows (the MLA
// latent and rope), values their first dv <= dk columns (the latent), tiles of kAttentionTile
// queries over `n_keys` cached rows: GFLOP/s, counting attention_flops_per_pair per query and key.
// Past a few thousand keys the rows leave the caches (K3: 2.3 kB a row, 75 MB at 32k) and each
// tile reads them from memory once (docs/performance.md, "Attention at long context").
double measure_attention_gflops(int threads, int dk, int dv, double seconds, int64_t n_keys = 1024);
// The keys measure_model_rates measures the attention at (ModelRates::attention_gflops_by_keys).
inline constexpr int64_t kAttentionKeys[] = {1024, 8192, 32768};
// Queries in a tile of the prefill's MLA attention (mla.cpp's largest).
inline constexpr int kAttentionTile = 64;
// n_keys cached rows [n_keys][dk] for the attention measurements: random for the first 1024 keys,
// repeated after (every row is read from memory all the same).
std::vector<float> attention_rows(int64_t n_keys, int dk);
// One tile of `tile` (at most kAttentionTile) queries Q [tile][dk] over n_keys cached rows, the
// values their first dv columns, in blocks of kAttendBlock keys as mla.cpp runs them: out
// [tile][dv] (unnormalised).
void attend_tile(const Kernels& k, const float* Q, int dk, int dv, const float* rows, int64_t n_keys, float* out,
                 int tile = kAttentionTile);

// The compute a prefill chunk costs at one model's own widths (docs/performance.md, "Time to
// first token"; chunk_compute.h uses them): the GFLOP/s of the engine's bf16 matmul at each column
// count the model's products have (bf16_product_widths), of its MXFP4 matmul at an expert's shape
// for 8, 16, 32 and 64 tokens an expert, and the work that is not a product (token_work.h). On
// small models these are far below the 2048-wide figure of measure_gflops: a 256-wide row is 16
// multiply-adds a lane before its 16-to-1 reduction.
ModelRates measure_model_rates(const ModelConfig& c, int threads, double seconds);

// A score (a dk-long dot) and a value row (dv multiply-adds) for one query and one key.
inline double attention_flops_per_pair(int dk, int dv) { return 2.0 * (dk + dv); }

}  // namespace k3::cli
