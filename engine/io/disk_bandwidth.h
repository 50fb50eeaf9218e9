// Read bandwidth measured the way the engine reads (used by `k3serve diskbench` and by the
// memory-dial benchmark for its I/O floor): `depth` threads, each with its own aligned buffer,
// reading through File::read_window_part, either large sequential runs or runs of one expert's
// size at random offsets, through O_DIRECT or the page cache.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace k3::io {

struct BandwidthRun {
    bool sequential = true;
    int64_t block_bytes = 16 << 20;
    int depth = 4;
    bool direct = true;
    int64_t max_bytes = int64_t(2) << 30;
    double max_seconds = 3.0;
    // > 0: the reads land one after another in one arena of this many bytes (wrapping), as the
    // trunk ring's reads do, instead of each thread reusing its own block-sized buffer.
    int64_t arena_bytes = 0;
};

struct BandwidthResult {
    int64_t bytes = 0;
    int64_t reads = 0;
    double seconds = 0;
    bool direct_used = false;   // false when O_DIRECT was asked for but refused
    double mb_per_s() const { return seconds > 0 ? double(bytes) / 1e6 / seconds : 0; }
};

// Throws k3::Error(Io) naming the file on a read failure.
BandwidthResult measure_bandwidth(const std::vector<std::filesystem::path>& files, const BandwidthRun& run, uint64_t seed = 1);

// PATH as a file, or the checkpoint files in a directory (*.safetensors, trunk.bin).
std::vector<std::filesystem::path> bench_files(const std::filesystem::path& path);

}  // namespace k3::io
