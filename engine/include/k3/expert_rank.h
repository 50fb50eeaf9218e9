// Expert parallelism's ranks other than 0 (docs/operations.md "Several machines"): an `mpirun`
// job whose rank 0 runs `k3serve serve` (or `run`) and whose other ranks run `k3serve rank`.
// Engine::load on rank 0 finds the job by itself; the other ranks call serve_expert_rank.
#pragma once
#include <functional>
#include <string>

#include "k3/options.h"

namespace k3 {

// Whether this build has MPI (CMake found it and K3_MPI is on).
bool expert_parallelism_built();

// Runs this process as a rank other than 0 of the job it was started in: opens the checkpoint
// in options.model_dir, checks with rank 0 that it is the same one (fingerprint), holds its
// share of every layer's routed experts within options.memory and computes them for rank 0
// until rank 0 ends the job (returns) or stops answering (throws). Throws k3::Error: Usage when
// not started as such a rank or built without MPI, Checkpoint when rank 0 serves another
// checkpoint, Memory when the plan is refused, Io when rank 0 goes away.
void serve_expert_rank(const EngineOptions& options, const std::function<void(const std::string&)>& progress);

}  // namespace k3
