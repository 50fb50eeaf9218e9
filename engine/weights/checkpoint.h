// A Kimi K3 checkpoint opened for serving: its config, its tensor directory checked against the
// one tensor list (model_tensors.h), and the byte runs the streaming engine reads: one
// contiguous run per layer holding all of that layer's trunk tensors, and one run per routed
// expert holding its six tensors back to back. open_checkpoint() refuses (k3::Error, kind
// Checkpoint or Config) anything missing, misshapen, truncated or laid out otherwise.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "weights/config.h"
#include "weights/safetensors.h"

namespace k3 {

struct ByteRun {
    int shard = -1;
    int64_t offset = 0;   // absolute offset in the shard file
    int64_t nbytes = 0;
};

// The six tensors of an expert, in this order, at these offsets from the run start.
enum ExpertPart { kW1Packed, kW1Scale, kW2Packed, kW2Scale, kW3Packed, kW3Scale, kExpertParts };

struct ExpertRun : ByteRun {
    std::array<int64_t, kExpertParts> part_offset{};
};

struct Checkpoint {
    std::filesystem::path dir;
    ModelConfig config;
    TensorDirectory directory;
    std::vector<ByteRun> layer_runs;     // [n_layers]: the layer's trunk tensors, contiguous
    std::vector<ExpertRun> expert_runs;  // [n_layers * n_experts]; empty (shard -1) for dense layers

    const ExpertRun& expert(int il, int ie) const { return expert_runs[size_t(il) * config.num_experts + ie]; }
    // The tensor's offset inside its layer's run (for binding pointers into a loaded run).
    int64_t offset_in_layer(const std::string& name, int il) const;
};

// Reads config.json and every shard header in `dir`, and validates all of it. Throws k3::Error
// with one message listing every problem found (file, tensor, expected vs actual).
Checkpoint open_checkpoint(const std::filesystem::path& dir);

// Checks the vision tensors (vision_tensors(): names, dtypes, shapes) against the directory;
// throws k3::Error(Checkpoint) naming each missing or misshapen one (and `--no-vision`, which
// serves the text model without them). No-op for a text-only config.
void check_vision_tensors(const Checkpoint& ck);

}  // namespace k3
