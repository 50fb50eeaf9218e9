// A shard the resident store maps (store/span_loader.h) that is truncated while the engine runs
// makes the next touch of a lost page a SIGBUS: the kernel has nothing to map there. There is
// no way to go on (the bytes a step needs are gone), but the operator should learn which file
// did it: register_mapped_file() records a mapping, and the SIGBUS handler installed with the
// first one writes "<path> changed on disk while mapped" to stderr before the process dies of
// the signal as it would have (so systemd restarts it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace k3 {

void register_mapped_file(const uint8_t* base, size_t length, const std::string& path);
void unregister_mapped_file(const uint8_t* base);

}  // namespace k3
