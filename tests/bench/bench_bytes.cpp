// Fewer bytes per token (docs/performance.md), measured the way a user runs the engine: `k3serve run
// --report` on k3-mini, each configuration its own process (so peak RSS is its own), the page
// cache dropped before each run when root, against a baseline binary (today's `main`, built
// separately) and against the same binary with the feature off, in the same run.
//
//   bench_bytes [MODEL_DIR=/work/models/k3-mini] --k3serve BIN [--baseline BIN] [--tokens N=8]
//               [--only decode|prefill|ready] [--prefill-tokens N=2048] [--rounds N=1]
//               [--budget "FLAGS"]   (decode at this budget only, e.g. "--trunk-gb 0.2 --cache-gb 0.1")
//
// decode:  trunk 0.3 GB / cache 0.1 GB (streamed), trunk 1.0 GB / cache 0.1 GB, trunk resident /
//          cache 0.5 GB: s/token (median of the decode steps), bytes read per token, peak RSS;
//          this binary without lookahead (the reference of the ratios), the baseline, then this
//          binary with lookahead, and with lookahead and a compressed trunk.
// prefill: N tokens at the streamed budget: the baseline's chunk (256) against chunks sized by
//          --prefill-mb.
// ready:   everything resident, against diskbench's sequential O_DIRECT figure on the same
//          files (best of depth 1 and 4): the run's Engine::load (every weight read), and the
//          daemon from spawn to its first answered completion with and without background loading,
//          and with it until every routed expert is in.
// Needs the packs next to the model: MODEL_DIR.pack (plain) and MODEL_DIR.zpack (--compress);
// they are made when missing.
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/daemon.h"
#include "load_average.h"

namespace {

using json = nlohmann::json;

std::string g_bin, g_base, g_model = "/work/models/k3-mini", g_only, g_budget;
int g_tokens = 8, g_prefill_tokens = 2048, g_rounds = 1;

void drop_page_cache() {
    if (geteuid() != 0) return;
    sync();
    std::ofstream f("/proc/sys/vm/drop_caches");
    f << "3\n";
}


// Runs `bin run MODEL args --report R` and returns the report (empty on failure).
json run_report(const std::string& bin, const std::string& args) {
    const std::string report = "/tmp/bench_bytes_report.json";
    std::filesystem::remove(report);
    drop_page_cache();
    const std::string cmd = bin + " run " + g_model + " " + args + " --report " + report + " > /tmp/bench_bytes_out.txt 2>&1";
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = std::system(cmd.c_str());
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::ifstream in(report);
    if (rc != 0 || !in) {
        std::printf("  FAILED (%d): %s\n", rc, cmd.c_str());
        return {};
    }
    json r = json::parse(in);
    r["process_seconds"] = wall;
    return r;
}

double median_decode(const json& r) {
    std::vector<double> s;
    const auto& steps = r["steps"];
    for (size_t i = 1; i < steps.size(); ++i) s.push_back(steps[i]["seconds"].get<double>());
    if (s.empty()) return 0;
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
}

// Bytes a decode step read, averaged over the steps after the first: trunk and experts apart.
struct StepBytes {
    double trunk = 0, experts = 0;
    double total() const { return trunk + experts; }
};

StepBytes bytes_per_token(const json& r) {
    const auto& steps = r["steps"];
    StepBytes b;
    for (size_t i = 1; i < steps.size(); ++i) {
        b.trunk += steps[i]["trunk_bytes"].get<double>();
        b.experts += steps[i]["expert_bytes"].get<double>();
    }
    const double n = steps.size() > 1 ? double(steps.size() - 1) : 1;
    return {b.trunk / n, b.experts / n};
}

// The disk's best O_DIRECT figures from `k3serve diskbench --json` on the model's files:
// sequential runs (what a trunk layer read is) and expert-sized random reads.
struct DiskSpeed {
    double seq_mb_s = 0, expert_mb_s = 0;
    // Seconds the disk needs for one step's bytes: the floor of a step that waits on reads.
    double floor_seconds(const StepBytes& b) const {
        return seq_mb_s > 0 && expert_mb_s > 0 ? b.trunk / 1e6 / seq_mb_s + b.experts / 1e6 / expert_mb_s : 0;
    }
};

DiskSpeed measure_disk(const std::string& flags) {
    drop_page_cache();
    const std::string out = "/tmp/bench_bytes_disk.json";
    std::system((g_bin + " diskbench " + g_model + " --json " + flags + " > " + out).c_str());
    DiskSpeed d;
    try {
        std::ifstream in(out);
        for (const auto& row : json::parse(in)) {
            if (row["mode"] != "direct") continue;
            double& best = row["pattern"] == "sequential" ? d.seq_mb_s : d.expert_mb_s;
            best = std::max(best, row["mb_per_s"].get<double>());
        }
    } catch (const std::exception& e) {
        std::printf("  diskbench output not understood: %s\n", e.what());
    }
    return d;
}

std::string ids(int n, int vocab) {
    std::string s;
    // ',' then the number, each with +=: a one-character literal + std::string makes GCC 12
    // report a false -Wrestrict at -O3 (GCC bug 105329), an error under K3_WERROR
    for (int i = 0; i < n; ++i) {
        if (i) s += ',';
        s += std::to_string((1008 + i * 7919) % vocab);
    }
    return s;
}

void ensure_packs() {
    for (const char* suffix : {".pack", ".zpack"}) {
        const std::string dir = g_model + suffix;
        if (std::filesystem::exists(dir + "/trunk.json")) continue;
        const std::string cmd = g_bin + " pack-trunk " + g_model + " " + dir + (std::strcmp(suffix, ".zpack") == 0 ? " --compress" : "") +
                                " --quiet";
        std::printf("making %s\n", dir.c_str());
        if (std::system(cmd.c_str()) != 0) std::printf("  FAILED: %s\n", cmd.c_str());
    }
}

void bench_decode() {
    struct Budget {
        const char* label;
        std::string flags;
    };
    std::vector<Budget> budgets = {
        {"streamed: trunk 0.3 GB, cache 0.1 GB", "--trunk-gb 0.3 --cache-gb 0.1"},
        {"middle: trunk 1.0 GB, cache 0.1 GB", "--trunk-gb 1.0 --cache-gb 0.1"},
        {"trunk resident, cache 0.5 GB", "--trunk-gb 100 --cache-gb 0.5"},
    };
    if (!g_budget.empty()) budgets = {{g_budget.c_str(), g_budget}};
    const std::string prompt = "--ids 1008,10484,318,15383,387 --gen " + std::to_string(g_tokens);
    const DiskSpeed disk = measure_disk("--seq-gb 2 --random-gb 0.5");
    std::printf("\ndisk (best O_DIRECT rows of diskbench): sequential %.0f MB/s, expert-sized random %.0f MB/s\n"
                "floor = the seconds the disk needs for a step's reads (trunk at the sequential figure, experts at the\n"
                "random one); \"of floor\" = floor / s/token: near 100%% the step only waits on the disk, and nothing but\n"
                "fewer bytes can make it faster\n",
                disk.seq_mb_s, disk.expert_mb_s);
    for (const auto& b : budgets) {
        std::printf("\n%s   (load average %s)\n", b.label, load_average().c_str());
        std::printf("  %-34s %9s %9s %11s %9s %8s %9s %8s\n", "configuration", "s/token", "vs first", "GB read/tok", "peak RSS",
                    "tokens", "floor", "of floor");
        struct Row {
            std::string name, bin, flags;
        };
        // The first row is the reference of the ratios: this binary without lookahead or compression.
        std::vector<Row> rows;
        rows.push_back({"this: no lookahead", g_bin, b.flags + " --no-lookahead"});
        if (!g_base.empty()) rows.push_back({"baseline (main)", g_base, b.flags});
        rows.push_back({"this: lookahead", g_bin, b.flags});
        const bool streams = std::string(b.flags).find("--trunk-gb 100") == std::string::npos;
        if (streams) rows.push_back({"this: lookahead + compressed trunk", g_bin, b.flags + " --trunk " + g_model + ".zpack"});
        double base = 0;
        std::string base_tokens;
        for (int round = 0; round < g_rounds; ++round)
            for (const auto& row : rows) {
                json r = run_report(row.bin, prompt + " " + row.flags);
                if (r.is_null()) continue;
                const double s = median_decode(r);
                if (base == 0) base = s, base_tokens = r["generated_ids"].dump();
                const std::string tokens = r["generated_ids"].dump();
                const StepBytes read = bytes_per_token(r);
                const double floor = disk.floor_seconds(read);
                std::printf("  %-34s %9.3f %8.2fx %11.3f %8.2f GB %8s %9.3f %7.0f%%\n", row.name.c_str(), s,
                            base > 0 && s > 0 ? base / s : 0.0, read.total() / 1e9, r["peak_rss_bytes"].get<double>() / 1e9,
                            base_tokens.empty() ? "" : (tokens == base_tokens ? "same" : "DIFFER"), floor,
                            s > 0 ? 100 * floor / s : 0.0);
                if (r.contains("lookahead_predicted") && r["lookahead_predicted"].get<double>() > 0)
                    std::printf("  %-34s lookahead: %.0f%% of %.0f predictions chosen; %.0f prefetched, %.0f asked for; expert "
                                "wait %.3f s, trunk wait %.3f s\n",
                                "", 100 * r["lookahead_confirmed"].get<double>() / r["lookahead_predicted"].get<double>(),
                                r["lookahead_predicted"].get<double>(), r["expert_prefetch_reads"].get<double>(),
                                r["expert_prefetch_hits"].get<double>(), r["expert_wait_seconds"].get<double>(),
                                r["trunk_wait_seconds"].get<double>());
                else if (r.contains("expert_wait_seconds"))
                    std::printf("  %-34s expert wait %.3f s, trunk wait %.3f s\n", "", r["expert_wait_seconds"].get<double>(),
                                r["trunk_wait_seconds"].get<double>());
            }
    }
}

void bench_prefill() {
    const std::string flags = "--trunk-gb 0.3 --cache-gb 0.1 --gen 1 --ids " + ids(g_prefill_tokens, 32768);
    std::printf("\nprefill of %d tokens, streamed (trunk 0.3 GB, cache 0.1 GB)   (load average %s)\n", g_prefill_tokens,
                load_average().c_str());
    std::printf("  %-34s %9s %9s %9s %9s   %s\n", "configuration", "seconds", "tok/s", "vs base", "peak RSS", "plan");
    struct Row {
        std::string name, bin, flags;
    };
    std::vector<Row> rows;
    if (!g_base.empty()) rows.push_back({"baseline (main), chunk 256", g_base, flags});
    rows.push_back({"this, default chunk (256)", g_bin, flags});
    rows.push_back({"this, --prefill-mb 256 (~580 tok)", g_bin, flags + " --prefill-mb 256"});
    rows.push_back({"this, --prefill-mb 1000 (2048 tok)", g_bin, flags + " --prefill-mb 1000"});
    rows.push_back({"this, 1000 MB + compressed trunk", g_bin, flags + " --prefill-mb 1000 --trunk " + g_model + ".zpack"});
    double base = 0;
    for (const auto& row : rows) {
        json r = run_report(row.bin, row.flags);
        if (r.is_null()) continue;
        const double s = r["prefill_seconds"].get<double>();
        if (row.bin == g_base || base == 0) base = s;
        std::printf("  %-34s %9.2f %9.1f %8.2fx %8.2f GB   %s\n", row.name.c_str(), s, g_prefill_tokens / s, base / s,
                    r["peak_rss_bytes"].get<double>() / 1e9, r["memory_plan"].get<std::string>().c_str());
    }
}

// `k3serve serve` from spawn until its first completion is answered, and (with background
// loading) until every routed expert is in: -1 when it never got there.
struct ServeReady {
    double first_completion = -1;
    double all_loaded = -1;
};

ServeReady serve_ready(const std::string& bin, bool background) {
    setenv("K3SERVE_BIN", bin.c_str(), 1);
    drop_page_cache();
    ServeReady out;
    const auto t0 = std::chrono::steady_clock::now();
    auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    try {
        std::vector<std::string> args = {g_model, "--port", "0"};  // info: DaemonProcess reads the port from the log
        if (!background) args.push_back("--no-background-load");
        k3::test::DaemonProcess d(args);
        auto c = d.client();
        const std::string body = R"({"prompt":"Hello","max_tokens":1,"temperature":0})";
        auto r = c.Post("/v1/completions", body, "application/json");
        if (!r || r->status != 200) {
            std::printf("  FAILED: the first completion: %s\n", r ? r->body.c_str() : "no answer");
            return out;
        }
        out.first_completion = since();
        // Every expert in: /health drops its "weights":"loading" (bounded: 10 minutes).
        for (int i = 0; i < 60000; ++i) {
            auto h = c.Get("/health");
            if (h && h->status == 200 && h->body.find("loading") == std::string::npos) {
                out.all_loaded = since();
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        d.signal(SIGTERM);
        d.wait_exit();
    } catch (const std::exception& e) {
        std::printf("  FAILED: %s\n", e.what());
    }
    return out;
}

void bench_ready() {
    std::printf("\ntime to ready, everything resident   (load average %s)\n", load_average().c_str());
    drop_page_cache();
    const std::string out = "/tmp/bench_bytes_disk.json";
    std::system((g_bin + " diskbench " + g_model + " --json --seq-gb 4 --random-gb 0.1 > " + out).c_str());
    double seq_mb_s = 0;
    try {
        std::ifstream in(out);
        json d = json::parse(in);
        for (const auto& row : d)
            if (row["pattern"] == "sequential" && row["mode"] == "direct") seq_mb_s = std::max(seq_mb_s, row["mb_per_s"].get<double>());
    } catch (const std::exception& e) {
        std::printf("  diskbench output not understood: %s\n", e.what());
    }
    double weights = 0;
    for (const auto& e : std::filesystem::directory_iterator(g_model))
        if (e.path().extension() == ".safetensors") weights += double(std::filesystem::file_size(e.path()));
    std::printf("  diskbench sequential O_DIRECT (best of qd 1 and 4): %.0f MB/s; the checkpoint: %.2f GB\n", seq_mb_s,
                weights / 1e9);
    auto line = [&](const std::string& name, double seconds, const char* note) {
        std::printf("  %-46s %7.2f s  (%5.0f MB/s, %3.0f%% of diskbench)  load %s%s\n", name.c_str(), seconds,
                    weights / 1e6 / seconds, seq_mb_s > 0 ? 100 * weights / 1e6 / seconds / seq_mb_s : 0.0,
                    load_average().substr(0, 4).c_str(), note);
    };
    auto row = [&](const char* name, const std::string& bin) {
        json r = run_report(bin, "--ids 1008 --gen 1");
        if (r.is_null()) return;
        const bool has_load = r.contains("load_seconds");
        line(std::string(name) + (has_load ? ": Engine::load" : ": whole process"),
             has_load ? r["load_seconds"].get<double>() : r["process_seconds"].get<double>(),
             has_load ? "" : "  [the baseline reports no load time]");
    };
    if (!g_base.empty()) row("run, baseline (main)", g_base);
    row("run, this", g_bin);
    // The daemon, from spawn (tokenizer, checkpoint, weights, first forward pass) to the first
    // answered completion; GB / seconds is the whole checkpoint over that time.
    const ServeReady eager = serve_ready(g_bin, false);
    if (eager.first_completion > 0) line("serve --no-background-load: first completion", eager.first_completion, "");
    const ServeReady bg = serve_ready(g_bin, true);
    if (bg.first_completion > 0)
        std::printf("  %-46s %7.2f s  (%.0f%% of the eager daemon's time)  load %s\n", "serve: first completion",
                    bg.first_completion, eager.first_completion > 0 ? 100 * bg.first_completion / eager.first_completion : 0.0,
                    load_average().substr(0, 4).c_str());
    if (bg.all_loaded > 0) line("serve: every routed expert loaded", bg.all_loaded, "");
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--k3serve") g_bin = value();
        else if (a == "--baseline") g_base = value();
        else if (a == "--tokens") g_tokens = std::stoi(value());
        else if (a == "--prefill-tokens") g_prefill_tokens = std::stoi(value());
        else if (a == "--rounds") g_rounds = std::stoi(value());
        else if (a == "--only") g_only = value();
        else if (a == "--budget") g_budget = value();
        else g_model = a;
    }
    if (g_bin.empty()) {
        std::fprintf(stderr, "usage: bench_bytes [MODEL_DIR] --k3serve BIN [--baseline BIN] [--tokens N] [--only decode|prefill|ready] [--budget FLAGS]\n");
        return 2;
    }
    std::printf("bench_bytes: %s; this %s; baseline %s\n", g_model.c_str(), g_bin.c_str(), g_base.empty() ? "(none)" : g_base.c_str());
    ensure_packs();
    if (g_only.empty() || g_only == "ready") bench_ready();
    if (g_only.empty() || g_only == "decode") bench_decode();
    if (g_only.empty() || g_only == "prefill") bench_prefill();
    return 0;
}
