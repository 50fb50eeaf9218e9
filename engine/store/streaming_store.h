// The streaming WeightStore (make_streaming_store in weight_store.h): the trunk as pinned layers
// plus a read ring (io/trunk_ring.h), the routed experts in a budgeted cache (io/expert_cache.h),
// all reads through one ReadPool. The layout (which files, which runs) is separate from the
// Checkpoint so tests can build stores over hand-made files.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "weights/checkpoint.h"
#include "store/memory_plan.h"
#include "store/weight_store.h"

namespace k3::io {

inline constexpr int kReaderThreads = 8;

struct StreamingLayout {
    std::vector<std::filesystem::path> files;
    std::vector<ByteRun> layer_runs;       // shard = index into files
    std::vector<ExpertRun> expert_runs;    // [n_layers * n_experts]; shard -1 for dense layers
    int n_layers = 0;
    int n_experts = 0;
    int experts_per_token = 0;
    // When the layers come from a packed trunk: each run's checksum, verified on its first read.
    std::vector<uint64_t> layer_checksums;
    // A compressed pack (trunk_pack.h, version 2): per layer the encoded size of each block of
    // codec_block_bytes raw bytes; the blocks start at layer_runs[il].offset, each 4096-aligned,
    // and layer_runs[il].nbytes is the raw run. Empty: layers are read as they are.
    std::vector<std::vector<int64_t>> layer_blocks;
    int64_t codec_block_bytes = 0;
};

// Compressed blocks in flight per layer read: each has a staging buffer it is read into and
// decoded from (on the read pool's thread, so decoding overlaps the next blocks' reads).
inline constexpr int kCodecStagingBuffers = 4;

// The checkpoint's shards, or (when trunk_dir is set) its packed trunk for the layer runs after
// open_trunk_pack() has checked it.
StreamingLayout layout_of(const Checkpoint& ckpt, const std::string& trunk_dir);

std::unique_ptr<WeightStore> make_streaming_store(const StreamingLayout& layout, const MemoryPlan& plan);

}  // namespace k3::io
