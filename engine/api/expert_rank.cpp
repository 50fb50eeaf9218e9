// serve_expert_rank (k3/expert_rank.h): a rank other than 0 of expert parallelism. It opens the
// checkpoint like Engine::load but holds only its share of the routed experts (no trunk, no
// prompt cache, no vision tower) and hands the MPI loop its model (engine/parallel/).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "api/engine_impl.h"
#include "k3/error.h"
#include "k3/expert_rank.h"
#include "parallel/expert_parallel.h"
#include "store/memory_plan.h"

namespace k3 {

bool expert_parallelism_built() { return parallel::built_with_mpi(); }

void serve_expert_rank(const EngineOptions& options, const std::function<void(const std::string&)>& progress) {
    auto say = [&](const std::string& s) {
        if (progress) progress(s);
    };
    const ExpertShare world = parallel::launched_world();
    if (world.rank == 0)
        throw Error(ErrorKind::Usage, "k3serve rank runs as rank 1 or above of an mpirun job whose rank 0 runs k3serve "
                                      "serve or run (docs/operations.md \"Several machines\")");
    std::unique_ptr<parallel::ExpertFollower> follower = parallel::connect_follower(world);
    Checkpoint ckpt;
    std::string fingerprint;
    try {
        ckpt = open_checkpoint(options.model_dir);
        ckpt.config.vision = VisionConfig{};  // experts only
        fingerprint = checkpoint_fingerprint(ckpt);
    } catch (const std::exception& e) {
        follower->hello(false, e.what());
        throw;
    }
    const int chunk_tokens = follower->hello(true, fingerprint);
    const ExpertShare share{world.rank, world.ranks};
    say("rank " + std::to_string(world.rank) + " of " + std::to_string(world.ranks) + " (pid " +
        std::to_string(::getpid()) + "): experts " +
        std::to_string(share.begin(ckpt.config.num_experts)) + ".." + std::to_string(share.end(ckpt.config.num_experts) - 1) +
        " of each layer");
    std::unique_ptr<WeightStore> store;
    std::unique_ptr<Model> model;
    try {
        MemoryOptions memory = options.memory;
        memory.expert_rank = share.rank;
        memory.expert_ranks = share.ranks;
        memory.background_load = false;
        io::MemoryPlan plan;
        store = open_weight_store(ckpt, memory, &plan);
        say(plan.describe());
        const int threads = options.threads > 0 ? options.threads : physical_cores();
        model = std::make_unique<Model>(ckpt, choose_kernels(options.kernels), threads, *store, chunk_tokens);
        model->experts_begin = share.begin(ckpt.config.num_experts);
        model->experts_end = share.end(ckpt.config.num_experts);
    } catch (const std::exception& e) {
        follower->ready(e.what());
        throw;
    }
    follower->ready("");
    say("serving rank 0");
    if (!follower->serve(*model)) throw Error(ErrorKind::Io, "rank 0 went away");
    say("rank 0 ended the job");
}

}  // namespace k3
