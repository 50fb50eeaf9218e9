// k3serve netbench: the per-layer exchange of expert parallelism between the ranks of an mpirun
// job, without the experts (engine/parallel/netbench.h), at the widths of a model's config, and
// the network figures `plan --ranks` takes (--net-latency-us, --net-gbit) fitted to it.
//   mpirun -n 2 --host a,b k3serve netbench [MODEL_DIR | CONFIG.json]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/projection.h"
#include "cli/subcommand.h"
#include "k3/cli.h"
#include "k3/error.h"
#include "kimi_k3_config.h"
#include "parallel/expert_parallel.h"
#include "parallel/netbench.h"
#include "weights/config.h"

namespace k3::cli {

namespace {

const char* const kUsage =
    "usage: mpirun -n N k3serve netbench [MODEL_DIR | CONFIG.json] [options]   (N >= 2, every rank the same)\n"
    "\n"
    "Times one MoE layer's exchange of expert parallelism (docs/operations.md 'Several machines'):\n"
    "rank 0 sends each other rank a pass's latent inputs and its rows' tokens, the rank sends its\n"
    "rows' outputs back at once (no experts computed), at the widths of the model (default: the\n"
    "built-in Kimi K3 config) and its share of top-k. Rank 0 prints, for each pass size, the bytes\n"
    "a layer exchanges and the microseconds from the first send to the last output back, then the\n"
    "latency and bandwidth of a line through them (fitted to each within its relative error): what\n"
    "plan --ranks takes as --net-latency-us and --net-gbit.\n"
    "  --tokens N[,N...]    pass sizes in tokens (default 1,4,16,64,256; 1 is a decoded token)\n"
    "  --seconds S          time for each pass size (default 1)\n"
    "  --json               one JSON object instead of the table\n"
    "Exit status: 0 measured; 1 a rank did not answer (K3_RANK_TIMEOUT_S, default 120 s); 2 usage\n"
    "error (not under mpirun with 2 or more ranks, a build without MPI).\n";

struct Line {
    double latency_us = 0;  // at 0 bytes
    double gbit = 0;        // 0: not fitted (one pass size, or no slope)
};

// Least squares through (bytes, median seconds): seconds = latency + bytes / rate, each point
// weighted by 1 / seconds^2 (its relative error), so that a 256-token pass's milliseconds do not
// drown a decoded token's microseconds, which are what a token pays per layer.
Line fit(const std::vector<parallel::ExchangeTiming>& t) {
    Line l;
    if (t.empty()) return l;
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto& e : t) {
        const double x = double(e.bytes), y = e.median_us * 1e-6, w = 1 / (y * y);
        sw += w, sx += w * x, sy += w * y, sxx += w * x * x, sxy += w * x * y;
    }
    const double den = sw * sxx - sx * sx;
    const double slope = den > 0 ? (sw * sxy - sx * sy) / den : 0;
    if (slope > 0) {
        l.gbit = 8 / slope / 1e9;
        l.latency_us = std::max(0.0, (sy - slope * sx) / sw) * 1e6;
    } else {
        l.latency_us = sy / sw * 1e6;
    }
    return l;
}

}  // namespace

int netbench_main(int argc, char** argv) {
    return run_subcommand({"netbench", kUsage}, argc, argv, [](ArgList& args) {
        std::string target, tokens_list = "1,4,16,64,256";
        double seconds = 1;
        bool json = false;
        while (args.next()) {
            if (args.is("--tokens")) tokens_list = args.value();
            else if (args.is("--seconds")) seconds = args.number();
            else if (args.is("--json")) json = true;
            else args.positional({&target});
        }
        if (!(seconds > 0 && seconds <= 60)) throw Error(ErrorKind::Usage, "--seconds must be in (0, 60]");
        std::vector<int> tokens;
        for (size_t at = 0; at <= tokens_list.size();) {
            const size_t comma = std::min(tokens_list.find(',', at), tokens_list.size());
            const std::string word = tokens_list.substr(at, comma - at);
            char* end = nullptr;
            const long v = std::strtol(word.c_str(), &end, 10);
            if (word.empty() || *end || v < 1 || v > 1'000'000)
                throw Error(ErrorKind::Usage, "--tokens expects pass sizes of 1 or more tokens, comma-separated");
            tokens.push_back(int(v));
            at = comma + 1;
        }
        const ModelConfig c = target.empty()                           ? parse_config(kKimiK3Config, "built-in Kimi K3 config")
                              : std::filesystem::is_directory(target) ? load_config(std::filesystem::path(target) / "config.json")
                                                                      : load_config(target);
        std::vector<parallel::ExchangeShape> shapes;
        for (int t : tokens) shapes.push_back({t, c.routed_expert_hidden_size, c.num_experts_per_token, c.num_experts});
        const ExpertShare world = parallel::launched_world();
        const std::vector<parallel::ExchangeTiming> timings = parallel::netbench(world, shapes, seconds);
        if (world.rank != 0) return 0;

        const Line line = fit(timings);
        const std::string model = target.empty() ? "Kimi K3 (built-in config)" : target;
        if (json) {
            nlohmann::json j;
            j["model"] = model;
            j["ranks"] = world.ranks;
            j["width"] = c.routed_expert_hidden_size;
            j["experts_per_token"] = c.num_experts_per_token;
            j["experts"] = c.num_experts;
            for (const auto& t : timings)
                j["passes"].push_back({{"tokens", t.tokens}, {"bytes", t.bytes}, {"rounds", t.rounds},
                                       {"min_us", t.min_us}, {"median_us", t.median_us}, {"p90_us", t.p90_us}});
            j["latency_us"] = line.latency_us;
            j["gbit"] = line.gbit;
            std::printf("%s\n", j.dump(2).c_str());
            return 0;
        }
        std::printf("netbench: %d ranks, %s: %d-wide latent rows, top-%d of %d experts, rank r of n owning experts "
                    "[N*r/n, N*(r+1)/n)\n",
                    world.ranks, model.c_str(), c.routed_expert_hidden_size, c.num_experts_per_token, c.num_experts);
        std::printf("  %8s %12s %8s %10s %10s %10s %9s\n", "tokens", "bytes/layer", "rounds", "min us", "median us",
                    "p90 us", "GB/s");
        for (const auto& t : timings)
            std::printf("  %8d %12lld %8d %10.1f %10.1f %10.1f %9.3f\n", t.tokens, (long long)t.bytes, t.rounds, t.min_us,
                        t.median_us, t.p90_us, double(t.bytes) / (t.median_us * 1e3));
        if (line.gbit > 0)
            std::printf("  a line through the medians: %.1f us + bytes at %.3g Gbit/s: plan --ranks %d --net-latency-us %.0f "
                        "--net-gbit %.3g\n",
                        line.latency_us, line.gbit, world.ranks, line.latency_us, line.gbit);
        else
            std::printf("  %.1f us a layer (give two or more --tokens sizes for a bandwidth)\n", line.latency_us);
        return 0;
    });
}

}  // namespace k3::cli
