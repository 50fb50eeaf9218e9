// make-model speed: how fast the generator produces k3-mini's bytes (all cores, in memory)
// against how fast this machine writes the same number of bytes to disk with the same 64 MiB
// writes, measured in the same run. The ratio says whether `make-model --preset k3-mini` is
// CPU-bound (ratio < 1) or disk-bound (ratio > 1), and the projection gives its wall time.
//
//   bench_make_model [SCRATCH_DIR] [LAYERS]   (default: $K3_TEST_TMP or /tmp, 3 MoE layers)
#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "synthetic/model_presets.h"
#include "synthetic/weights.h"

using namespace k3;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
    const char* tmp = std::getenv("K3_TEST_TMP");
    const std::filesystem::path dir = argc > 1 ? argv[1] : (tmp ? tmp : "/tmp");
    const int layers = argc > 2 ? std::atoi(argv[2]) : 3;
    const ModelConfig& cfg = find_preset("k3-mini")->config;

    // Tensors of `layers` MoE layers (trunk + experts), the bulk of k3-mini.
    std::vector<TensorSpec> specs;
    for (int il = 1; il <= layers; ++il) {
        for (auto& t : layer_trunk_tensors(cfg, il)) specs.push_back(t);
        for (int ie = 0; ie < cfg.num_experts; ++ie)
            for (auto& t : expert_tensors(cfg, il, ie)) specs.push_back(t);
    }
    int64_t bytes = 0, model_bytes = 0;
    for (const auto& t : specs) bytes += t.nbytes();
    for (const auto& t : model_tensors(cfg)) model_bytes += t.nbytes();

    // 1. Generation into one 64 MiB buffer, blocks spread over all cores as the writer does.
    struct Item {
        size_t tensor;
        int64_t block;
    };
    std::vector<Item> items;
    std::vector<TensorRecipe> recipes;
    for (size_t i = 0; i < specs.size(); ++i) {
        recipes.push_back(recipe_for(cfg, specs[i], 1));
        for (int64_t b = 0; b * kFillBlockBytes < specs[i].nbytes(); ++b) items.push_back({i, b});
    }
    std::vector<uint8_t> buf(64 << 20);
    const double g0 = now();
#pragma omp parallel for schedule(dynamic, 4)
    for (size_t k = 0; k < items.size(); ++k) {
        const auto& it = items[k];
        // Scatter into the buffer modulo its size: the cost measured is generation, not RAM size.
        const int64_t off = (int64_t(k) * kFillBlockBytes) % (int64_t(buf.size()) - kFillBlockBytes);
        fill_tensor_block(recipes[it.tensor], specs[it.tensor].nbytes(), it.block, buf.data() + off);
    }
    const double gen_s = now() - g0;

    // 2. Writing the same number of bytes (64 MiB writes, then fdatasync) to a scratch file.
    const auto path = dir / "bench_make_model.tmp";
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        std::perror(path.c_str());
        return 1;
    }
    const double w0 = now();
    for (int64_t done = 0; done < bytes;) {
        const int64_t n = std::min<int64_t>(int64_t(buf.size()), bytes - done);
        if (::write(fd, buf.data(), size_t(n)) != n) {
            std::perror("write");
            return 1;
        }
        done += n;
    }
    ::fdatasync(fd);
    const double write_s = now() - w0;
    ::close(fd);
    std::filesystem::remove(path);

    const double gen_gbs = double(bytes) / gen_s / 1e9, write_gbs = double(bytes) / write_s / 1e9;
    std::printf("k3-mini, %d MoE layers = %.2f GB, %d threads\n", layers, double(bytes) / 1e9, omp_get_max_threads());
    std::printf("generate: %.2f s  %.2f GB/s\n", gen_s, gen_gbs);
    std::printf("write:    %.2f s  %.2f GB/s (64 MiB writes + fdatasync)\n", write_s, write_gbs);
    std::printf("generate/write speed ratio: %.2f (> 1: the disk is the limit)\n", gen_gbs / write_gbs);
    std::printf("projected k3-mini (%.2f GB): generation alone %.0f s, disk alone %.0f s; limit 120 s\n",
                double(model_bytes) / 1e9, double(model_bytes) / 1e9 / gen_gbs, double(model_bytes) / 1e9 / write_gbs);
    return 0;
}
