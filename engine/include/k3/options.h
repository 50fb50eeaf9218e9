// What Engine::load is asked for: the checkpoint, the memory budget, threads and kernels. Their
// own header so that the memory plan and the weight stores can take them without the facade.
#pragma once
#include <string>

namespace k3 {

// How much memory the engine may use for weights (spec 5.2, issue "memory dial").
struct MemoryOptions {
    std::string preset;        // "" (everything resident), "laptop", "desktop", "workstation",
                               // "server", "max", "auto"
    double trunk_gb = -1;      // explicit overrides; < 0 = from the preset
    double cache_gb = -1;
    std::string trunk_dir;     // optional packed trunk (k3serve pack-trunk)
};

struct EngineOptions {
    std::string model_dir;
    MemoryOptions memory;
    int threads = 0;           // 0 = number of physical cores
    std::string kernels;       // "" = best for this CPU; "scalar", "avx2", "avx512" to force
};

}  // namespace k3
