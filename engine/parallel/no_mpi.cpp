// A build without MPI (K3_HAVE_MPI unset, docs/development.md): the expert-parallel entry
// points exist and refuse, naming what is missing.
#ifndef K3_HAVE_MPI
#include "k3/error.h"
#include "parallel/expert_parallel.h"

namespace k3::parallel {

namespace {

[[noreturn]] void refuse() {
    throw Error(ErrorKind::Usage,
                "started by mpirun with several ranks, but this build has no MPI (install libopenmpi-dev and "
                "rebuild; docs/operations.md \"Several machines\")");
}

}  // namespace

bool built_with_mpi() { return false; }
std::unique_ptr<ExpertLeader> connect_leader(ExpertShare, const std::string&, int) { refuse(); }
std::unique_ptr<ExpertFollower> connect_follower(ExpertShare) { refuse(); }

}  // namespace k3::parallel
#endif
