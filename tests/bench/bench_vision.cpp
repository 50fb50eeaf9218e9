// Seconds per image through the vision tower, merge and projector with Kimi K3's real shapes
// (27 blocks of 1024, 12 heads of 128, the 4096 -> 7168 projector; random bf16 weights), against
// the rate the same bf16 product kernel reaches on an in-cache shape in the same run.
//
//   build/tests/bench/bench_vision [--threads N] [--full]
//
// 640x480 (1,656 patches, 414 rows) always; --full adds 1920x1080 (10,764 patches, 2,691 rows,
// about 16x the work: attention grows with the square of the patches). For each image: the
// seconds, the model FLOPs (docs/model.md "Image input": 2 x params x patches for the
// products plus 4 x L^2 x 1536 per block for attention), the achieved GFLOP/s and its ratio to
// the kernel's in-cache rate; and the prompt positions the image costs (N rows plus the three
// framing tokens and the size text).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "model/compute.h"
#include "tests/bench/load_average.h"
#include "util/thread_pool.h"
#include "vision/vision_tower.h"
#include "weights/vision_config.h"

using namespace k3;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

AlignedBytes random_bf16(size_t n, float scale, uint64_t seed) {
    AlignedBytes b(n * 2);
    auto* p = reinterpret_cast<uint16_t*>(b.data());
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, scale);
    for (size_t i = 0; i < n; ++i) p[i] = f32_to_bf16(nd(rng));
    return b;
}

VisionWeights k3_tower() {
    VisionWeights w;
    VisionConfig& c = w.cfg;
    c.present = true;
    c.patch_size = 14, c.hidden = 1024, c.intermediate = 4096, c.heads = 12, c.layers = 27, c.qkv_hidden = 1536;
    c.pos_emb_height = c.pos_emb_width = 64, c.merge_h = c.merge_w = 2, c.mm_hidden = 1024, c.text_hidden = 7168;
    c.projector_eps = 1e-5f;
    const size_t D = 1024, A = 1536, F = 4096, M = 4096, H = 7168;
    uint64_t seed = 1;
    w.patch_embed = random_bf16(D * 588, 0.04f, seed++);
    w.pos_table.assign(64 * 64 * D, 0.1f);
    for (int b = 0; b < c.layers; ++b) {
        VisionBlockWeights blk;
        blk.norm0.assign(D, 1.0f);
        blk.norm1.assign(D, 1.0f);
        blk.wqkv = random_bf16(3 * A * D, 0.03f, seed++);
        blk.wo = random_bf16(D * A, 0.01f, seed++);
        blk.fc0 = random_bf16(F * D, 0.03f, seed++);
        blk.fc1 = random_bf16(D * F, 0.01f, seed++);
        w.blocks.push_back(std::move(blk));
    }
    w.final_norm.assign(D, 1.0f);
    w.proj0 = random_bf16(M * M, 0.015f, seed++);
    w.proj2 = random_bf16(H * M, 0.015f, seed++);
    w.post_norm.assign(H, 1.0f);
    return w;
}

// GFLOP/s of the bf16 product on a 1024 x 1024 weight (2 MB, cache-resident) over 64 tokens.
double kernel_rate(const Compute& cp) {
    const int64_t rows = 1024, cols = 1024, T = 64;
    const AlignedBytes W = random_bf16(size_t(rows * cols), 0.03f, 99);
    std::vector<float> X(size_t(T * cols), 0.5f), Y(size_t(T * rows));
    cp.matmul_bf16(bf16(W), X.data(), Y.data(), rows, cols, T);  // warm
    int reps = 0;
    const auto t0 = Clock::now();
    do {
        cp.matmul_bf16(bf16(W), X.data(), Y.data(), rows, cols, T);
        ++reps;
    } while (since(t0) < 2.0);
    return 2.0 * double(rows * cols * T) * reps / since(t0) / 1e9;
}

double model_flops(const VisionConfig& c, const ImageGeometry& g) {
    const double L = double(g.patches()), D = c.hidden, A = c.qkv_hidden, F = c.intermediate;
    const double per_block = 2 * L * (D * 3 * A + A * D + 2 * D * F) + 4 * L * L * A;
    const double M = c.merged_width(), H = c.text_hidden, N = double(g.rows());
    return 2 * L * 588 * D + c.layers * per_block + 2 * N * (M * M + M * H);
}

}  // namespace

int main(int argc, char** argv) {
    int threads = int(std::thread::hardware_concurrency());
    bool full = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--full")) full = true;
    }
    const Kernels& k = select_kernels();
    Compute cp(k, threads);
    const int64_t chunk = 256;
    cp.reserve(chunk);
    std::printf("bench_vision: kernels %s, %d threads, load average %s\n", k.name, threads, load_average().c_str());
    const VisionWeights w = k3_tower();
    const double peak = kernel_rate(cp);
    std::printf("bf16 product kernel, in cache (1024x1024 x 64 tokens): %.1f GFLOP/s\n", peak);

    std::vector<std::pair<int, int>> sizes = {{640, 480}};
    if (full) sizes.push_back({1920, 1080});
    for (auto [W, H] : sizes) {
        const ImageGeometry g = image_geometry(W, H);
        std::vector<float> patches(size_t(g.patches()) * 588);
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> ud(-1, 1);
        for (auto& v : patches) v = ud(rng);
        const auto t0 = Clock::now();
        const std::vector<float> rows = encode_image_rows(w, cp, chunk, g, patches);
        const double s = since(t0);
        const double flops = model_flops(w.cfg, g);
        // "<|media_begin|>image WxH<|media_content|><|media_pad|><|media_end|>": the pad becomes
        // the N rows; the size text is a few BPE tokens (not counted here: tokenizer-dependent).
        std::printf("%dx%d: %lld patches, %lld rows (+3 framing tokens + the size text): %.2f s, %.2f TFLOP, "
                    "%.1f GFLOP/s = %.2f of the kernel's in-cache rate (load %s)\n",
                    W, H, (long long)g.patches(), (long long)g.rows(), s, flops / 1e12, flops / s / 1e9,
                    flops / s / 1e9 / peak, load_average().c_str());
        if (rows.size() != size_t(g.rows()) * 7168) return 1;
    }
    return 0;
}
