#include "io/disk_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>

#include "io/file.h"
#include "k3/error.h"

namespace k3::io {

std::vector<std::filesystem::path> bench_files(const std::filesystem::path& path) {
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(path)) {
        for (const auto& e : std::filesystem::directory_iterator(path)) {
            auto ext = e.path().extension();
            if (e.is_regular_file() && (ext == ".safetensors" || e.path().filename() == "trunk.bin"))
                files.push_back(e.path());
        }
        std::sort(files.begin(), files.end());
        if (files.empty()) throw Error(ErrorKind::Usage, path.string() + " holds no *.safetensors or trunk.bin to read");
    } else if (std::filesystem::is_regular_file(path)) {
        files.push_back(path);
    } else {
        throw Error(ErrorKind::Usage, path.string() + " is not a file or directory");
    }
    return files;
}

BandwidthResult measure_bandwidth(const std::vector<std::filesystem::path>& paths, const BandwidthRun& run, uint64_t seed) {
    std::vector<File> files;
    int64_t total = 0;
    for (const auto& p : paths) {
        files.push_back(File::open(p, run.direct));
        total += files.back().size_at_open();
    }
    // Sequential: the files back to back in blocks. Random: block-sized runs at random offsets.
    struct Piece {
        int file;
        int64_t offset, n;
    };
    std::vector<Piece> pieces;
    int64_t budget = std::min(run.max_bytes, total);
    if (run.sequential) {
        for (int f = 0; f < int(files.size()) && budget > 0; ++f)
            for (int64_t off = 0; off < files[f].size_at_open() && budget > 0; off += run.block_bytes) {
                int64_t n = std::min({run.block_bytes, files[f].size_at_open() - off, budget});
                pieces.push_back({f, off, n});
                budget -= n;
            }
    } else {
        std::mt19937_64 rng(seed);
        for (int64_t i = 0; budget > 0 && i < 1000000; ++i) {
            int f = int(rng() % files.size());
            int64_t span = files[f].size_at_open() - run.block_bytes;
            if (span <= 0) continue;
            int64_t off = int64_t(rng() % uint64_t(span));
            pieces.push_back({f, off, run.block_bytes});
            budget -= run.block_bytes;
        }
    }
    std::atomic<size_t> next{0};
    std::atomic<int64_t> bytes{0}, reads{0};
    std::mutex err_mu;
    std::string error;
    auto t0 = std::chrono::steady_clock::now();
    auto deadline = t0 + std::chrono::duration<double>(run.max_seconds);
    const size_t slot = window_capacity(run.block_bytes);
    const size_t arena_slots = run.arena_bytes > 0 ? std::max<size_t>(1, size_t(run.arena_bytes) / slot) : 0;
    AlignedBuffer arena(arena_slots * slot);
    std::vector<std::thread> threads;
    for (int t = 0; t < std::max(1, run.depth); ++t)
        threads.emplace_back([&] {
            AlignedBuffer own(arena_slots > 0 ? 0 : slot);
            for (;;) {
                size_t i = next.fetch_add(1);
                if (i >= pieces.size() || std::chrono::steady_clock::now() > deadline) return;
                const Piece& p = pieces[i];
                const File& f = files[size_t(p.file)];
                int64_t lo = 0, len = 0;
                f.window(p.offset, p.n, &lo, &len);
                uint8_t* dst = arena_slots > 0 ? arena.data() + (i % arena_slots) * slot : own.data();
                Status s = f.read_window_part(dst, lo, len, p.offset + p.n - lo);
                if (!s.ok()) {
                    std::lock_guard lock(err_mu);
                    error = s.message;
                    return;
                }
                bytes += p.n;
                reads += 1;
            }
        });
    for (auto& t : threads) t.join();
    if (!error.empty()) throw Error(ErrorKind::Io, error);
    BandwidthResult r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.bytes = bytes;
    r.reads = reads;
    r.direct_used = std::all_of(files.begin(), files.end(), [](const File& f) { return f.direct(); });
    return r;
}

}  // namespace k3::io
