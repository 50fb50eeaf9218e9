// launched_world and the deadlines (expert_parallel.h): read from the environment, with or
// without MPI in the build.
#include <cstdlib>
#include <string>

#include "parallel/expert_parallel.h"

namespace k3::parallel {

namespace {

int env_int(const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoi(v) : fallback;
}

double env_seconds(const char* name, double fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    const double s = std::atof(v);
    return s > 0 ? s : fallback;
}

}  // namespace

ExpertShare launched_world() {
    ExpertShare w;
    w.ranks = env_int("OMPI_COMM_WORLD_SIZE", env_int("PMI_SIZE", 1));
    w.rank = env_int("OMPI_COMM_WORLD_RANK", env_int("PMI_RANK", 0));
    if (w.ranks < 1 || w.rank < 0 || w.rank >= w.ranks) return {};
    return w;
}

Deadlines Deadlines::from_environment() {
    Deadlines d;
    d.exchange = env_seconds("K3_RANK_TIMEOUT_S", d.exchange);
    d.heartbeat = env_seconds("K3_RANK_HEARTBEAT_S", d.heartbeat);
    d.load = env_seconds("K3_RANK_LOAD_TIMEOUT_S", d.load);
    return d;
}

}  // namespace k3::parallel
