// What Engine::load is asked for: the checkpoint, the memory budget, threads and kernels. Their
// own header so that the memory plan and the weight stores can take them without the facade.
#pragma once
#include <string>

namespace k3 {

// How much memory the engine may use for weights (docs/model.md "Memory presets").
struct MemoryOptions {
    std::string preset;        // "" (everything resident), "laptop", "desktop", "workstation",
                               // "server", "max", "auto"
    double trunk_gb = -1;      // explicit overrides; < 0 = from the preset
    double cache_gb = -1;
    std::string trunk_dir;     // optional packed trunk (k3serve pack-trunk)
    double prefill_mb = -1;    // activations of one prefill chunk (MB, 10^6 bytes); the chunk is as
                               // many tokens as fit. < 0: the preset's, or the default chunk (at
                               // most 256 tokens and 256 MB) without one
    int pass_tokens = 0;       // at most this many tokens a prefill pass (0: as many as memory allows,
                               // lent memory included); a shorter pass bounds what a request that
                               // arrives during one waits, and tests cut prompts with it
    bool lookahead = true;     // while layer L computes, read the experts layer L+1's router picks
                               // for L's input (streaming store; exact: it only schedules reads)
    bool background_load = false;  // everything resident: Engine::load returns once the trunk is
                               // read and the routed experts are read behind it; a step needing
                               // one not read yet reads it first (store/background_load.h)
    double prompt_cache_gb = -1;  // RAM for the shared prompt cache; < 0 = from the preset, 0 = off
    std::string prompt_cache_dir; // the prompt cache's disk tier ("" = none)
    double prompt_cache_dir_gb = -1;  // its size on disk; < 0 = from the preset
    // Expert parallelism (docs/operations.md "Several machines"): this process is rank
    // `expert_rank` of `expert_ranks` and holds only its share of each layer's routed experts
    // (store/expert_share.h); a rank other than 0 holds no trunk. Set by the engine, not by users.
    int expert_rank = 0;
    int expert_ranks = 1;
    // Test hook (docs/development.md "Tests wait on states"): with background_load, while the
    // file this names exists the background reads stop after the trunk, so a test steps the
    // engine while experts are unread (the steps read those they need). "" = none.
    std::string hold_background_load;
};

struct EngineOptions {
    std::string model_dir;
    MemoryOptions memory;
    int threads = 0;           // 0 = physical_cores()
    std::string kernels;       // "" = best for this CPU; "scalar", "avx2", "avx512", "neon" to force
    bool vision = true;        // read, check and hold the vision tower and projector when the
                               // checkpoint has them (false: `--no-vision`, text only, the vision
                               // tensors are neither checked nor read)
    // The tower's RMSNorm epsilon: nn.RMSNorm without eps, which PyTorch >= 2.7 resolves to
    // 2^-23 and 2.4-2.6 to bf16's 2^-7 = 0.0078125 (docs/model.md "Image input").
    double vision_norm_eps = 1.1920928955078125e-7;
    // Test hook (docs/development.md "Tests wait on states"): while the file this names exists, a
    // pass of more than one token waits before its middle layer (until cancelled). "" = none.
    std::string hold_pass;
};

// The default compute thread count: the number of physical cores (SMT siblings share the memory
// bandwidth that decode is bound by, and only add contention). Distinct (package, core) pairs in
// /proc/cpuinfo, else sysfs core ids, else the logical CPU count. The one count the engine, the
// daemon's --threads default and `k3serve doctor` use.
int physical_cores();

}  // namespace k3
