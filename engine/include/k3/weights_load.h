// WeightsLoad: how far the weights are read, as Engine::weights_load() reports it and the weight
// stores produce it. A header of its own so that the stores (engine/store/) can name it without
// the engine facade (k3/engine.h), which only api/, cli/, server/ and tests include.
#pragma once
#include <cstdint>
#include <string>

namespace k3 {

// With everything resident and background loading, Engine::load returns once the trunk is in
// memory and the routed experts go on loading behind it: loaded reaches total when they are all
// in. Stores that read on demand (a memory budget) report 0 / 0.
struct WeightsLoad {
    int64_t loaded_bytes = 0;
    int64_t total_bytes = 0;
    int64_t failures = 0;  // pieces whose read failed (a step needing one fails with its IoError)
    std::string first_failure;  // the first one's message (file and offset)
    bool complete() const { return loaded_bytes >= total_bytes; }
};

}  // namespace k3
