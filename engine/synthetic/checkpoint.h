// Writes a complete synthetic checkpoint in the release's layout (docs/model.md "Checkpoint
// files"): nested config.json, safetensors shards model-0000K-of-0000N.safetensors,
// model.safetensors.index.json, tiktoken.model and tokenizer_config.json. Tensor order is
// model_tensors(): each layer's trunk tensors, then that layer's routed experts (six tensors each,
// back to back); the model-level tensors (embed, final norms, lm_head) last, followed by the vision
// tower and projector. A layer never straddles two shards, and the model-level tensors are in the
// last shard.
//
// Tensors are packed without holes (the safetensors format forbids gaps), and each shard's JSON
// header is padded with spaces so the data section starts at a multiple of 64 bytes in the file.
// Tensor starts are therefore 64-byte aligned wherever every earlier tensor in the shard has a
// size that is a multiple of 64 bytes: true throughout `demo` and `k3-mini`; the `tiny` shapes
// have a few 32..96-byte vectors (e.g. 8 experts' F32 router bias) after which starts are only
// 16-byte aligned.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "weights/config.h"
#include "weights/model_tensors.h"
#include "synthetic/weights.h"

namespace k3 {

inline constexpr int64_t kShardDataAlignment = 64;

struct PlannedTensor {
    TensorSpec spec;
    int64_t data_begin = 0;  // offset inside the shard's data section (safetensors data_offsets[0])
};

struct ShardPlan {
    std::string file_name;               // model-0000K-of-0000N.safetensors
    std::vector<PlannedTensor> tensors;  // storage order
    std::string header;                  // the JSON header, space-padded (see above)
    int64_t data_bytes = 0;
    int64_t file_bytes() const { return 8 + int64_t(header.size()) + data_bytes; }
};

// The shards of `cfg` split into `n_shards` files of roughly equal size, whole layers only.
// Throws k3::Error(Usage) unless 1 <= n_shards <= num_hidden_layers + 1.
std::vector<ShardPlan> plan_shards(const ModelConfig& cfg, int n_shards);

struct SyntheticModelStats {
    int shards = 0;
    int64_t tensors = 0;
    int64_t tensor_bytes = 0;  // sum of tensor sizes (the index's metadata.total_size)
    int64_t file_bytes = 0;    // all shard files
    double seconds = 0;
};

// Writes the whole model into `dir` (created if missing). A directory that already holds files
// is refused (k3::Error(Usage)) unless `overwrite`, which first deletes the files a previous
// make-model wrote there (and refuses if other *.safetensors files are present). config.json is
// written last, so its presence means the model is complete. `progress` (may be empty) gets one
// line per shard. `ending` (off by default) leans the weights toward ending answers (weights.h).
SyntheticModelStats write_synthetic_model(const ModelConfig& cfg, const std::filesystem::path& dir, uint64_t seed,
                                          int n_shards, bool overwrite,
                                          const std::function<void(const std::string&)>& progress = {},
                                          const AnswerEnding& ending = {});

}  // namespace k3
