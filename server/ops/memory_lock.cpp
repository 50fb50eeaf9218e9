#include "ops/memory_lock.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

namespace k3::server {

namespace {

constexpr int kCapIpcLock = 14;  // linux/capability.h

// Whether the effective capability set has CAP_IPC_LOCK (lock without RLIMIT_MEMLOCK).
bool has_ipc_lock_capability() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("CapEff:", 0) == 0) {
            const uint64_t caps = std::stoull(line.substr(7), nullptr, 16);
            return (caps >> kCapIpcLock) & 1;
        }
    return false;
}

}  // namespace

MemoryLock lock_process_memory() {
    rlimit limit{};
    ::getrlimit(RLIMIT_MEMLOCK, &limit);
    const bool unlimited = limit.rlim_cur == RLIM_INFINITY;
    if (!unlimited && !has_ipc_lock_capability())
        return {false, "memory not locked: RLIMIT_MEMLOCK is " + std::to_string(limit.rlim_cur / 1024) +
                           " KiB, so under memory pressure the kernel may page out weights the plan counts as "
                           "resident (allow it with LimitMEMLOCK=infinity in the unit, --ulimit memlock=-1:-1 in "
                           "Docker, ulimit -l unlimited in a shell; --no-mlock silences this)"};
    if (::mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0)
        return {false, std::string("memory not locked: mlockall failed: ") + std::strerror(errno)};
    return {true, std::string("memory locked as it is touched (mlockall on fault; ") +
                      (unlimited ? "RLIMIT_MEMLOCK unlimited" : "CAP_IPC_LOCK") + ")"};
}

}  // namespace k3::server
