// A prefill chunk's compute, stage by stage (k3/forward_stages.h, the stages the run report
// times), from the model's shapes and this machine's rates at those shapes: every weight product
// a layer runs (its FLOPs at the bf16 or MXFP4 rate measured at its column width, or at its
// tokens per expert), and the work that is not a product at the per-token, per-head and per-call
// costs of token_work.h. docs/performance.md, "Time to first token", compares it with the run
// report's forward_stage_seconds.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "cli/token_work.h"
#include "k3/forward_stages.h"
#include "weights/config.h"

namespace k3::cli {

// What one thread of the machine does at one model's widths (machine_speed.h,
// measure_model_rates); the forward pass's threads multiply it by work.parallel_speedup.
struct ModelRates {
    std::vector<std::pair<int64_t, double>> bf16_gflops;    // by a product's column count
    std::vector<std::pair<int64_t, double>> expert_gflops;  // MXFP4 expert products by tokens per expert
    TokenWork work;
    double attention_gflops = 0;  // blocked attention over cached rows (measure_attention_gflops, one thread)
    // the same by the cached keys a query sees (kAttentionKeys); when measured, a chunk's
    // attention takes the figure nearest its queries' mean keys
    std::vector<std::pair<int64_t, double>> attention_gflops_by_keys;
    double mem_gbps = 0;          // for the lm_head's one row
    bool measured() const { return !bf16_gflops.empty(); }
};

// The figure measured at the key nearest to `key` (by ratio: 48 tokens an expert takes the 64's
// figure over the 32's only when nearer); 0 without any.
double rate_at(const std::vector<std::pair<int64_t, double>>& by_key, int64_t key);

struct ChunkCompute {
    ForwardStageSeconds seconds{};  // by stage
    double attention_seconds = 0;   // the part of mla_attention that is the blocked attention itself
    int64_t joins = 0;              // parallel regions (each charged work.join_seconds, in its stage)
    double total() const;
};

// The column counts of the bf16 products a layer of this model runs, with the most rows each has
// (what measure_model_compute times), and the tokens per expert a chunk of T tokens gives.
std::vector<std::pair<int64_t, int64_t>> bf16_product_widths(const ModelConfig& c);
int64_t tokens_per_expert(const ModelConfig& c, int64_t T);

// A chunk of T tokens at positions p0 .. p0 + T - 1 (its MLA queries attend to every earlier
// position), with `experts_per_batch` routed experts acquired at a time (the store's batch).
ChunkCompute chunk_compute(const ModelConfig& c, const ModelRates& r, int64_t T, int64_t p0, int experts_per_batch);

}  // namespace k3::cli
