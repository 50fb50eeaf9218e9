// Shared by the tests/model suites: synthetic checkpoints generated with the built k3serve
// (make-model) into the test scratch directory, and small helpers over Engine/Session.
#pragma once
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "k3/engine.h"

namespace k3::test {

inline std::string env_or(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v && *v ? v : fallback;
}

// Writes `make-model --preset preset --seed seed` into $K3_TEST_TMP/<owner>/<preset>-<seed>
// once, and returns the directory. `owner` keeps concurrently running test binaries apart.
inline std::string synthetic_model(const std::string& owner, const std::string& preset, int seed) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(env_or("K3_TEST_TMP", "/tmp/k3-test")) / owner / (preset + "-" + std::to_string(seed));
    if (!fs::exists(dir / "config.json")) {
        fs::create_directories(dir.parent_path());
        const std::string cmd = env_or("K3SERVE_BIN", "k3serve") + " make-model '" + dir.string() + "' --preset " +
                                preset + " --seed " + std::to_string(seed) + " > /dev/null";
        if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    }
    return dir.string();
}

inline std::unique_ptr<Engine> load_engine(const std::string& dir, int threads, const std::string& kernels = "") {
    EngineOptions o;
    o.model_dir = dir;
    o.threads = threads;
    o.kernels = kernels;
    return Engine::load(o);
}

// A deterministic prompt of n ids inside the ordinary (non-special) vocabulary.
inline std::vector<int32_t> test_prompt(int n, int vocab, int salt = 0) {
    std::vector<int32_t> ids;
    const int ordinary = vocab > 512 ? vocab - 256 : vocab / 2;
    for (int i = 0; i < n; ++i) ids.push_back(int32_t((i * 37 + salt * 101 + 11) % ordinary));
    return ids;
}

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline int32_t argmax(std::span<const float> v) {
    int32_t best = 0;
    for (size_t i = 1; i < v.size(); ++i)
        if (v[i] > v[size_t(best)]) best = int32_t(i);
    return best;
}

}  // namespace k3::test
