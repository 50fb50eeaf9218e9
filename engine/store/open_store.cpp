// open_weight_store (weight_store.h): the one place that picks the weight store for a memory
// plan. The plan is made (and refused when it needs more than 95% of MemAvailable) before
// anything is allocated; with no budget everything is resident.
#include "store/memory_plan.h"
#include "store/weight_store.h"

namespace k3 {

std::unique_ptr<WeightStore> open_weight_store(const Checkpoint& ckpt, const MemoryOptions& memory,
                                               io::MemoryPlan* plan) {
    const ExpertShare share{memory.expert_rank, memory.expert_ranks};
    const io::MemoryPlan p =
        io::make_memory_plan(io::share_footprint(io::footprint_of(ckpt), share, ckpt.config.num_experts), memory,
                             io::read_mem_available());
    if (plan) *plan = p;
    if (!p.streaming) return make_resident_store(ckpt, memory.background_load, share, memory.hold_background_load);
    return make_streaming_store(ckpt, p);
}

}  // namespace k3
