// Decode and prefill speed of the whole model with every weight resident, against the resident
// floor measured in the same run: (weight bytes one decoded token touches) / (this machine's
// memory read bandwidth). The bytes touched are every layer's trunk run, top_k routed experts
// per MoE layer and the lm_head (the embedding row is negligible).
//
// usage: bench_decode [MODEL_DIR] [--gen N] [--prompt N] [--threads N] [--kernels NAME]
//   MODEL_DIR defaults to /work/models/k3-mini (make-model --preset k3-mini). Target: decode
//   within 1.5x of the floor.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "weights/checkpoint.h"
#include "k3/options.h"
#include "k3/engine.h"
#include "weights/model_tensors.h"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Sum of n floats (n a multiple of 16) with 16 independent partial sums, so the loop vectorises
// and is load-bound. Cloned per ISA so the probe reads with the widest loads this CPU has, as
// the kernels do (x86 only: aarch64's baseline NEON is the kernels' width there).
#if defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
double stream_sum(const float* p, int64_t n) {
    float acc[16] = {};
    for (int64_t i = 0; i < n; i += 16)
        for (int l = 0; l < 16; ++l) acc[l] += p[i + l];
    double total = 0;
    for (float a : acc) total += a;
    return total;
}

// Streaming read of a 1 GiB buffer by `threads` threads; best of 5.
double read_bandwidth_gbs(int threads) {
    const int64_t n = (int64_t{1} << 30) / 4;
    std::vector<float> buf(static_cast<size_t>(n));
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) buf[size_t(i)] = float(i & 255);
    double best = 1e30;
    volatile double sink = 0;
    for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = Clock::now();
        double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
        {
            const int nt = omp_get_num_threads(), id = omp_get_thread_num();
            const int64_t b = n / 16 * id / nt * 16, e = n / 16 * (id + 1) / nt * 16;
            total += stream_sum(buf.data() + b, e - b);
        }
        sink = sink + total;
        best = std::min(best, since(t0));
    }
    return double(n) * 4 / best / 1e9;
}

int32_t argmax(std::span<const float> v) {
    int32_t best = 0;
    for (size_t i = 1; i < v.size(); ++i)
        if (v[i] > v[size_t(best)]) best = int32_t(i);
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    std::string dir = "/work/models/k3-mini", kernels;
    int gen = 16, prompt_len = 256, threads = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> const char* {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--gen") gen = std::atoi(next());
        else if (a == "--prompt") prompt_len = std::atoi(next());
        else if (a == "--threads") threads = std::atoi(next());
        else if (a == "--kernels") kernels = next();
        else if (a == "--help") {
            std::puts("usage: bench_decode [MODEL_DIR] [--gen N] [--prompt N] [--threads N] [--kernels NAME]");
            return 0;
        } else dir = a;
    }

    // bytes one decoded token touches
    const k3::Checkpoint ckpt = k3::open_checkpoint(dir);
    const k3::ModelConfig& c = ckpt.config;
    int64_t trunk = 0;
    int n_moe = 0;
    for (const auto& r : ckpt.layer_runs) trunk += r.nbytes;
    for (int il = 0; il < c.num_hidden_layers; ++il) n_moe += c.is_dense(il) ? 0 : 1;
    const int64_t experts = int64_t(n_moe) * c.num_experts_per_token * k3::expert_bytes(c);
    const int64_t lm_head = int64_t(c.vocab_size) * c.hidden_size * 2;
    const int64_t touched = trunk + experts + lm_head;

    k3::EngineOptions opt;
    opt.model_dir = dir;
    opt.threads = threads;
    opt.kernels = kernels;
    std::fprintf(stderr, "loading %s (all weights resident)...\n", dir.c_str());
    auto t_load = Clock::now();
    auto engine = k3::Engine::load(opt);
    std::fprintf(stderr, "loaded in %.1f s\n", since(t_load));
    const int nth = threads > 0 ? threads : k3::physical_cores();
    const double bw = read_bandwidth_gbs(nth);
    const double floor_s = double(touched) / (bw * 1e9);
    std::printf("model %s: %s\nkernels %s, %d threads\n", dir.c_str(), engine->info().shape.c_str(),
                engine->info().kernels.c_str(), nth);
    std::printf("weight bytes touched per decoded token: %.3f GB (trunk %.3f + experts %.3f + lm_head %.3f)\n",
                touched / 1e9, trunk / 1e9, experts / 1e9, lm_head / 1e9);
    std::printf("memory read bandwidth: %.2f GB/s -> resident floor %.4f s/token\n", bw, floor_s);

    // prefill throughput: a prompt of prompt_len tokens from an empty session
    std::vector<int32_t> prompt;
    for (int i = 0; i < prompt_len; ++i) prompt.push_back(int32_t((i * 7919 + 13) % (c.vocab_size - 256)));
    auto s = engine->new_session(prompt_len + gen + 1);
    k3::CancelFlag cancel{false};
    auto t0 = Clock::now();
    if (!s->sync(prompt, cancel).ok()) return 1;
    const double prefill_s = since(t0);
    std::printf("prefill: %d tokens in %.2f s = %.1f tokens/s\n", prompt_len, prefill_s, prompt_len / prefill_s);

    // decode: greedy steps, one token each
    std::vector<double> steps;
    int32_t tok = argmax(s->logits());
    for (int i = 0; i < gen; ++i) {
        t0 = Clock::now();
        if (!s->append(tok, cancel).ok()) return 1;
        steps.push_back(since(t0));
        tok = argmax(s->logits());
    }
    std::sort(steps.begin(), steps.end());
    double mean = 0;
    for (double v : steps) mean += v;
    mean /= double(steps.size());
    const double median = steps[steps.size() / 2];
    std::printf("decode: %d steps, median %.4f s/token, mean %.4f, best %.4f\n", gen, median, mean, steps.front());
    std::printf("decode / floor: median %.2fx, best %.2fx (target <= 1.5x); effective %.1f GB/s\n", median / floor_s,
                steps.front() / floor_s, touched / median / 1e9);
    return 0;
}
