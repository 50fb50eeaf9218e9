// open_weight_store (weight_store.h): the one place that picks the weight store for a memory
// plan. With no budget everything is resident.
#include "util/error.h"
#include "weight_store.h"

namespace k3 {

std::unique_ptr<WeightStore> open_weight_store(const Checkpoint& ckpt, const MemoryOptions& memory,
                                               std::string* plan) {
    const bool budgeted = !memory.preset.empty() || memory.trunk_gb >= 0 || memory.cache_gb >= 0 ||
                          !memory.trunk_dir.empty();
    if (budgeted)
        throw Error(ErrorKind::Usage,
                    "memory budgets (--preset, --trunk-gb, --cache-gb, --trunk) need the streaming weight store, "
                    "which this build does not have yet; omit them to load everything resident");
    if (plan) *plan = "everything resident (trunk and all routed experts in memory)";
    return make_resident_store(ckpt);
}

}  // namespace k3
