// The memory dial on a real-size model (k3-mini): seconds per token, bytes read per token and
// peak RSS at three budgets, against the I/O floor measured on the same disk in the same run.
//
//   bench_memory_dial [MODEL_DIR=/work/models/k3-mini] [--tokens N=8] [--only a|b|c|r]
//
// Budgets (performance.md): (a) trunk 0.3 GB, cache 0.1 GB; (b) trunk 1.0 GB, cache 0.1 GB;
// (c) trunk resident, cache 0.5 GB; optionally (r) everything resident (needs ~9.5 GB).
// Each budget runs in its own child process, so its peak RSS (getrusage of the child) is its
// own. As root, the page cache is dropped before each budget (O_DIRECT reads bypass it anyway).
// The floor: trunk bytes / sequential O_DIRECT bandwidth + expert bytes / random expert-sized
// O_DIRECT bandwidth at queue depth 16, both measured here first. Every budget must produce the
// same tokens; the program says so and exits 1 if they differ.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weights/checkpoint.h"
#include "io/disk_bandwidth.h"
#include "store/memory_plan.h"
#include "k3/engine.h"
#include "weights/model_tensors.h"

using namespace k3;

namespace {

struct Budget {
    const char* id;
    const char* label;
    double trunk_gb, cache_gb;  // < 0: as much as the model needs
};

const Budget kBudgets[] = {
    {"a", "trunk 0.3 GB, cache 0.1 GB", 0.3, 0.1},
    {"b", "trunk 1.0 GB, cache 0.1 GB", 1.0, 0.1},
    {"c", "trunk resident, cache 0.5 GB", -1, 0.5},
    {"r", "everything resident", -2, -2},
};

const int32_t kPrompt[] = {1008, 10484, 318, 15383, 387};

int32_t argmax(std::span<const float> v) {
    size_t best = 0;
    for (size_t i = 1; i < v.size(); ++i)
        if (v[i] > v[best]) best = i;
    return int32_t(best);
}

bool drop_page_cache() {
    if (geteuid() != 0) return false;
    sync();
    std::ofstream f("/proc/sys/vm/drop_caches");
    f << "3\n";
    return bool(f);
}

// In the child: load with the budget, run the prompt and N-1 decode steps; JSON on `fd`.
void run_budget(const std::string& model, const Budget& b, int tokens, int fd) {
    nlohmann::json out;
    try {
        EngineOptions o;
        o.model_dir = model;
        if (b.trunk_gb > -2) {
            o.memory.trunk_gb = b.trunk_gb;
            o.memory.cache_gb = b.cache_gb;
        }
        auto engine = Engine::load(o);
        out["plan"] = engine->info().memory_plan;
        auto session = engine->new_session(int(std::size(kPrompt)) + tokens + 1);
        CancelFlag cancel{false};
        std::vector<int32_t> generated;
        for (int step = 0; step < tokens; ++step) {
            EngineStats s0 = engine->stats();
            auto t0 = std::chrono::steady_clock::now();
            Status st = step == 0 ? session->sync(kPrompt, cancel) : session->append(generated.back(), cancel);
            double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (!st.ok()) throw std::runtime_error(st.message);
            EngineStats s1 = engine->stats();
            generated.push_back(argmax(session->logits()));
            out["steps"].push_back({{"seconds", secs},
                                    {"trunk_bytes", s1.trunk_bytes_read - s0.trunk_bytes_read},
                                    {"expert_bytes", s1.expert_bytes_read - s0.expert_bytes_read},
                                    {"io_seconds", s1.io_seconds - s0.io_seconds}});
        }
        EngineStats t = engine->stats();
        out["tokens"] = generated;
        out["pinned_layers"] = t.pinned_layers;
        out["ring_bytes"] = t.ring_bytes;
        out["expert_requests"] = t.expert_requests;
        out["expert_hits"] = t.expert_hits;
        out["expert_evictions"] = t.expert_evictions;
    } catch (const std::exception& e) {
        out["error"] = e.what();
    }
    std::string s = out.dump();
    (void)!write(fd, s.data(), s.size());
}

}  // namespace

int main(int argc, char** argv) {
    std::string model = "/work/models/k3-mini";
    int tokens = 8;
    std::string only = "abc";
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--tokens" && i + 1 < argc) tokens = std::stoi(argv[++i]);
        else if (a == "--only" && i + 1 < argc) only = argv[++i];
        else if (a == "--help") {
            std::printf("usage: bench_memory_dial [MODEL_DIR] [--tokens N] [--only abcr]\n");
            return 0;
        } else model = a;
    }
    Checkpoint ckpt = open_checkpoint(model);
    const int64_t expert = expert_bytes(ckpt.config);

    std::printf("bench_memory_dial on %s: %d tokens (prompt of %zu ids + %d decode steps)\n", model.c_str(), tokens,
                std::size(kPrompt), tokens - 1);
    // The disk, measured the way the engine reads it.
    auto files = io::bench_files(model);
    io::BandwidthRun seq{true, 16 << 20, 4, true, int64_t(2) << 30, 4.0};
    io::BandwidthRun rnd{false, expert, 16, true, int64_t(1) << 30, 4.0};
    drop_page_cache();
    double seq_mbs = io::measure_bandwidth(files, seq).mb_per_s();
    double rnd_mbs = io::measure_bandwidth(files, rnd, 7).mb_per_s();
    std::printf("disk: sequential O_DIRECT 16 MiB qd 4: %.0f MB/s; random %lld-byte O_DIRECT qd 16: %.0f MB/s\n", seq_mbs,
                (long long)expert, rnd_mbs);

    std::vector<int32_t> reference_tokens;
    bool identical = true;
    for (const Budget& b : kBudgets) {
        if (only.find(b.id) == std::string::npos) continue;
        bool dropped = drop_page_cache();
        int fds[2];
        if (pipe(fds) != 0) return 1;
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            run_budget(model, b, tokens, fds[1]);
            _exit(0);
        }
        close(fds[1]);
        std::string text;
        char buf[4096];
        ssize_t n;
        while ((n = read(fds[0], buf, sizeof buf)) > 0) text.append(buf, size_t(n));
        close(fds[0]);
        int status = 0;
        struct rusage ru {};
        wait4(pid, &status, 0, &ru);
        double peak_gb = double(ru.ru_maxrss) * 1024 / 1e9;
        std::printf("\n(%s) %s%s\n", b.id, b.label, dropped ? " [page cache dropped]" : "");
        if (text.empty()) {
            std::printf("  child died (status %d)\n", status);
            identical = false;
            continue;
        }
        auto r = nlohmann::json::parse(text);
        if (r.contains("error")) {
            std::printf("  error: %s\n", r["error"].get<std::string>().c_str());
            identical = false;
            continue;
        }
        std::printf("  %s\n", r["plan"].get<std::string>().c_str());
        // Steady decode: the decode steps (step 0 is the prompt and the pinned layers' first read).
        const auto& steps = r["steps"];
        double secs = 0, trunk = 0, experts = 0, io = 0;
        int n_dec = 0;
        for (size_t i = 1; i < steps.size(); ++i, ++n_dec) {
            secs += steps[i]["seconds"].get<double>();
            trunk += steps[i]["trunk_bytes"].get<double>();
            experts += steps[i]["expert_bytes"].get<double>();
            io += steps[i]["io_seconds"].get<double>();
        }
        if (n_dec == 0) n_dec = 1;
        secs /= n_dec;
        trunk /= n_dec;
        experts /= n_dec;
        io /= n_dec;
        double floor_simple = (trunk + experts) / 1e6 / seq_mbs;
        double floor = trunk / 1e6 / seq_mbs + experts / 1e6 / rnd_mbs;
        std::printf("  step 0 (prompt): %.3f s\n", steps[0]["seconds"].get<double>());
        std::printf("  decode: %.3f s/token; read %.3f GB/token (trunk %.3f + experts %.3f); waiting on reads %.3f s/token "
                    "(%.0f%%)\n",
                    secs, (trunk + experts) / 1e9, trunk / 1e9, experts / 1e9, io, 100 * io / secs);
        std::printf("  I/O floor %.3f s/token (trunk at sequential speed, experts at random qd16 speed) -> ratio %.2fx; "
                    "all at sequential speed %.3f s -> %.2fx\n",
                    floor, floor > 0 ? secs / floor : 0.0, floor_simple, floor_simple > 0 ? secs / floor_simple : 0.0);
        std::printf("  achieved %.0f MB/s; pinned layers %d, ring %.3f GB; expert requests %lld, retained %lld, "
                    "evictions %lld\n",
                    secs > 0 ? (trunk + experts) / 1e6 / secs : 0.0, r["pinned_layers"].get<int>(),
                    r["ring_bytes"].get<double>() / 1e9, r["expert_requests"].get<long long>(), r["expert_hits"].get<long long>(),
                    r["expert_evictions"].get<long long>());
        std::printf("  peak RSS %.2f GB\n", peak_gb);
        std::printf("  tokens:");
        for (auto t : r["tokens"]) std::printf(" %d", t.get<int>());
        std::printf("\n");
        auto toks = r["tokens"].get<std::vector<int32_t>>();
        if (reference_tokens.empty()) reference_tokens = toks;
        else if (toks != reference_tokens) identical = false;
    }
    std::printf("\ntokens identical across budgets: %s\n", identical ? "yes" : "NO");
    return identical ? 0 : 1;
}
