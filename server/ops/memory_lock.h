// Keeps the daemon's memory in RAM. The resident weights are the shards' mapped pages and the
// rest (pinned trunk layers, expert cache, sessions) is ordinary memory; under memory pressure
// the kernel may drop or page out any of it, and the next token then waits on the disk for bytes
// the plan counted as resident. With `--mlock` (the default) the daemon locks its pages as they
// are touched (mlockall with MCL_ONFAULT, so locking costs nothing at start), where the system
// lets it lock without a ceiling: RLIMIT_MEMLOCK unlimited, or CAP_IPC_LOCK (root). A finite
// limit is not used: MCL_FUTURE would make every allocation past it fail.
#pragma once
#include <string>

namespace k3::server {

struct MemoryLock {
    bool locked = false;
    std::string detail;  // one line for the log: what was done, or why not and how to allow it
};

// Locks current and future pages on fault, when allowed without a ceiling (see above).
MemoryLock lock_process_memory();

}  // namespace k3::server
