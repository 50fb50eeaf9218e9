// Helpers for tests of background loading (MemoryOptions::background_load, serve's default):
// holding the background reads back, and cutting the experts out from under a running engine.
#pragma once
#include <algorithm>
#include <filesystem>

#include "common/hold_file.h"

#include "weights/checkpoint.h"

namespace k3::test {

// While an object lives, the resident store's background reads are held back for an engine
// given `file` (MemoryOptions::hold_background_load, the daemon's --test-hold-background-load):
// steps run while experts are unread, the ones they need read for them. release() lets the load
// go on.
struct HoldBackgroundLoad : HoldFile {
    HoldBackgroundLoad() : HoldFile("hold-background-load") {}
};

// Cuts a copy of a checkpoint's first shard short right after its last trunk run, so that the
// routed experts stored behind it can no longer be read while every trunk byte stays (the
// resident store maps the shards: losing a trunk page it already mapped would be a SIGBUS, not
// an error a step can return). For tests of reads that fail after start-up.
// Returns whether experts were cut off (false: the shard ends with its trunk).
inline bool cut_experts_after_trunk(const std::filesystem::path& model) {
    const Checkpoint ckpt = open_checkpoint(model);
    int64_t trunk_end = 0, expert_end = 0;
    for (const ByteRun& r : ckpt.layer_runs)
        if (r.shard == 0) trunk_end = std::max(trunk_end, r.offset + r.nbytes);
    for (const ExpertRun& e : ckpt.expert_runs)
        if (e.shard == 0) expert_end = std::max(expert_end, e.offset + e.nbytes);
    const int64_t cut = (trunk_end + 4095) / 4096 * 4096;
    if (cut >= expert_end) return false;
    std::filesystem::resize_file(ckpt.directory.shards()[0].path, uintmax_t(cut));
    return true;
}

}  // namespace k3::test
