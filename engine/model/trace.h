// Named intermediates of the forward pass (house style, "intermediates are named"; ggml's
// cb(cur, "attn_out", il)). A Trace attached to a Model (Model::trace) receives the output of
// each step as it is computed, [T][width] fp32 for the T tokens of the chunk, under a stable
// name: "embed", "blk.N.attn_in", "blk.N.attn_out", "blk.N.ffn_in", "blk.N.mlp_out" (dense
// layers) or "blk.N.moe_out", "blk.N.out", "result_norm". tests/reference/k3_reference.py
// records the same names (--dump-trace), so a test can name the first step where the engine and
// the reference part. With no trace attached a step costs one null check: nothing is named,
// copied or computed for it.
#pragma once
#include <cstdint>
#include <string>

namespace k3 {

class Trace {
public:
    virtual ~Trace() = default;
    // `step` is the name without the layer ("attn_out"); `layer` is -1 for model-level steps.
    virtual void record(const char* step, int layer, const float* rows, int T, int64_t width) = 0;
};

// "blk.3.attn_out", or the step alone for a model-level step.
inline std::string trace_name(const char* step, int layer) {
    return layer < 0 ? std::string(step) : "blk." + std::to_string(layer) + "." + step;
}

// The one call forward() makes per step.
inline void trace_step(Trace* trace, const char* step, int layer, const float* rows, int T, int64_t width) {
    if (trace) [[unlikely]] trace->record(step, layer, rows, T, width);
}

}  // namespace k3
