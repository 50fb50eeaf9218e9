// An `mpirun` job on this machine for the expert-parallel tests: rank 0 runs a k3serve command
// (run or serve), ranks 1.. run `k3serve rank`, over loopback TCP, oversubscribed, unbound, as
// root where CI runs as root, and with recovery on so that losing a rank leaves rank 0 running
// (docs/operations.md "Several machines").
#pragma once
#include <string>

#include "common/process.h"
#include "k3/expert_rank.h"

namespace k3::test {

// Why these tests cannot run here ("" when they can): a build without MPI, or no mpirun.
inline std::string mpi_missing() {
    if (!k3::expert_parallelism_built()) return "this build has no MPI (libopenmpi-dev not found by CMake)";
    if (run_command("command -v mpirun >/dev/null 2>&1").exit_code != 0) return "mpirun is not installed (openmpi-bin)";
    return "";
}

// The mpirun words before the first program: `ranks` in all.
inline std::string mpirun_prefix() {
    return "mpirun --allow-run-as-root --oversubscribe --bind-to none --enable-recovery --mca btl self,tcp "
           "--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo";
}

// rank 0: `k3serve <rank0_args>`; ranks 1..ranks-1: `k3serve rank <rank_args>`.
inline std::string mpi_job(int ranks, const std::string& rank0_args, const std::string& rank_args) {
    return mpirun_prefix() + " -n 1 " + k3serve_bin() + " " + rank0_args + " : -n " + std::to_string(ranks - 1) + " " +
           k3serve_bin() + " rank " + rank_args;
}

}  // namespace k3::test
