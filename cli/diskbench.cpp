// k3serve diskbench PATH: read bandwidth the way the engine reads: large sequential runs (the
// trunk) and expert-sized reads at random offsets (the expert cache's misses) at queue depths
// 1, 4 and 16, through O_DIRECT and through the page cache.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "io/disk_bandwidth.h"
#include "k3/cli.h"
#include "cli/subcommand.h"
#include "k3/error.h"

namespace k3::cli {

namespace {

constexpr int64_t kK3MiniExpertBytes = 1253376;

std::string usage() {
    return "usage: k3serve diskbench PATH [options]\n"
           "  PATH               a file, or a model directory (its *.safetensors and trunk.bin are read)\n"
           "  --seq-gb X         bytes to read sequentially per row (default 2)\n"
           "  --random-gb X      bytes of random expert-sized reads per row (default 0.5)\n"
           "  --seconds S        time cap per row (default 3)\n"
           "  --expert-bytes N   random read size (default: one expert of PATH/config.json, else " +
           std::to_string(kK3MiniExpertBytes) +
           ")\n"
           "  --json             one JSON object instead of the table\n"
           "Buffered rows read through the page cache: data read recently is served from memory.\n";
}

// One expert's bytes from config.json (nested text_config or flat): 3 matrices of
// moe_intermediate x latent MXFP4 weights, 4 bits each plus one scale byte per 32.
int64_t expert_bytes_from_config(const std::filesystem::path& dir) {
    std::ifstream in(dir / "config.json");
    if (!in) return 0;
    try {
        auto j = nlohmann::json::parse(in);
        const auto& t = j.contains("text_config") ? j["text_config"] : j;
        int64_t latent = t.value("routed_expert_hidden_size", int64_t(0));
        int64_t inter = t.value("moe_intermediate_size", int64_t(0));
        return 3 * inter * (latent / 2 + latent / 32);
    } catch (const std::exception&) {
        return 0;
    }
}

}  // namespace

int diskbench_main(int argc, char** argv) {
    return run_subcommand({"diskbench", usage()}, argc, argv, [](ArgList& args) {
        std::string path;
        double seq_gb = 2, random_gb = 0.5, seconds = 3;
        int64_t expert = 0;
        bool json = false;
        while (args.next()) {
            if (args.is("--seq-gb")) seq_gb = args.number();
            else if (args.is("--random-gb")) random_gb = args.number();
            else if (args.is("--seconds")) seconds = args.number();
            else if (args.is("--expert-bytes")) expert = args.integer(int64_t(1) << 40);
            else if (args.is("--json")) json = true;
            else args.positional({&path});
        }
        if (path.empty()) throw Error(ErrorKind::Usage, "PATH is required");
        if (expert <= 0 && std::filesystem::is_directory(path)) expert = expert_bytes_from_config(path);
        if (expert <= 0) expert = kK3MiniExpertBytes;

        auto files = io::bench_files(path);
        struct Row {
            const char* pattern;
            int64_t block;
            int depth;
            bool direct;
        };
        std::vector<Row> rows;
        for (bool direct : {true, false}) {
            rows.push_back({"sequential", 16 << 20, 1, direct});
            rows.push_back({"sequential", 16 << 20, 4, direct});
            for (int d : {1, 4, 16}) rows.push_back({"random", expert, d, direct});
        }
        nlohmann::json out = nlohmann::json::array();
        if (!json)
            std::printf("diskbench %s (%zu file%s, random reads of %lld bytes)\n", path.c_str(), files.size(),
                        files.size() == 1 ? "" : "s", (long long)expert);
        for (size_t r = 0; r < rows.size(); ++r) {
            const Row& row = rows[r];
            io::BandwidthRun run;
            run.sequential = std::strcmp(row.pattern, "sequential") == 0;
            run.block_bytes = row.block;
            run.depth = row.depth;
            run.direct = row.direct;
            run.max_bytes = int64_t((run.sequential ? seq_gb : random_gb) * 1e9);
            run.max_seconds = seconds;
            io::BandwidthResult res = io::measure_bandwidth(files, run, 1000 + r);
            const char* mode = row.direct ? (res.direct_used ? "O_DIRECT" : "O_DIRECT refused->buffered") : "buffered";
            if (json) {
                out.push_back({{"pattern", row.pattern},
                               {"block_bytes", row.block},
                               {"queue_depth", row.depth},
                               {"mode", row.direct ? "direct" : "buffered"},
                               {"direct_used", res.direct_used},
                               {"bytes", res.bytes},
                               {"seconds", res.seconds},
                               {"mb_per_s", res.mb_per_s()}});
            } else {
                std::printf("  %-10s %9lld B  qd %2d  %-9s %8.0f MB/s  (%.2f GB in %.2f s)\n", row.pattern,
                            (long long)row.block, row.depth, mode, res.mb_per_s(), double(res.bytes) / 1e9, res.seconds);
                std::fflush(stdout);
            }
        }
        if (json) std::printf("%s\n", out.dump().c_str());
        return 0;
    });
}

}  // namespace k3::cli
