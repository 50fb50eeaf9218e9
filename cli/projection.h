// What one decoded token and one prefill chunk cost under a memory plan, from the machine's
// bandwidths: the one first-order model behind `k3serve doctor`'s table and `k3serve plan`'s
// projection (docs/performance.md, "Planning a budget", compares it with measured runs).
// Streamed trunk layers (those the ring reads again each token) and cache-missing experts come
// from the disk; everything a token multiplies by is swept from memory; the trunk ring reads
// ahead while layers compute (except where it cannot hold a layer beside the one before it:
// there read and compute add up), expert reads are waited for. K3's router is near-flat (spec
// 5.1), so the expert cache's hit rate is about the share of the pool it holds beyond the
// layer's own top-k.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cli/chunk_compute.h"
#include "store/memory_plan.h"
#include "weights/config.h"

namespace k3::cli {

// The model's sizes, from its config alone (what every sound checkpoint of it holds).
struct ModelSizes {
    std::string name;
    ModelConfig config;
    std::vector<int64_t> layer_bytes;  // trunk bytes of each layer
    int64_t resident = 0;              // embed + lm_head + model norms
    int64_t embed = 0;                 // read by row from disk, never held (model.h)
    int64_t lm_head = 0;
    int64_t one_expert = 0;
    int64_t pool = 0;
    int moe_layers = 0;
    int64_t trunk() const;
    int64_t total() const { return resident + trunk() + pool; }
};
ModelSizes sizes_of(const ModelConfig& c, std::string name);
// The memory plan's view of the model (as io::footprint_of reads it from a checkpoint, up to the
// few KiB of alignment of each read window).
io::ModelFootprint footprint_of(const ModelSizes& m);

struct Bandwidths {
    double disk_gbps = 1;        // sequential large reads (the streamed trunk)
    double expert_gbps = 1;      // expert-sized random reads at depth 16 (cache misses)
    double mem_gbps = 10;        // memory read bandwidth, all cores
    double gflops = 0;           // bf16 matmul throughput for prefill (0: not measured, memory-bound)
    double attention_gflops = 0; // blocked attention at the model's widths (0: not measured, as gflops)
    // measured by cached keys with every core (kAttentionKeys), where the model's widths were not
    // measured and no attention figure was given
    std::vector<std::pair<int64_t, double>> attention_gflops_by_keys;
    double compress_ratio = 1;   // streamed trunk bytes x this (a `pack-trunk --compress` pack)
    // At the model's own widths, product by product and stage by stage (machine_speed.h,
    // measure_model_rates); not measured: every product at `gflops` and nothing else charged.
    ModelRates model;
};

// The rates chunk_compute charges: b.model with b's attention and memory figures, or, where the
// model's widths were not measured, every product at b.gflops.
ModelRates rates_of(const Bandwidths& b);

// Expert parallelism (docs/operations.md "Several machines"): the part of the model one rank of
// an mpirun job computes: its share of each layer's routed experts (store/expert_share.h), and
// the trunk, lm_head and everything else on rank 0 only. The default is one process: all of it.
struct RankPart {
    double experts = 1;   // the share of each layer's routed experts
    bool trunk = true;    // the trunk, lm_head and the rest (rank 0)
};

struct Projection {
    int64_t need = 0;                         // the plan's bytes
    double expert_hit = 1;                    // share of expert lookups the cache answers
    int64_t trunk_disk_bytes = 0;             // per token: streamed trunk layers
    int64_t expert_disk_bytes = 0;            // per token: cache-missing experts
    int64_t disk_bytes_per_token = 0;         // the two above
    int64_t memory_bytes_per_token = 0;       // what a token multiplies by, swept from memory
    double trunk_seconds = 0, expert_seconds = 0, memory_seconds = 0;
    double seconds_per_token = 0;
    double expert_part_seconds = 0;           // of it, the routed experts' reads and sweep
    int waiting_layers = 0;                   // streamed layers the ring cannot read ahead
    int kept_layers = 0;                      // streamed layers that stay in the ring (read once, not per token)
    double wait_seconds = 0;                  // what that adds to a token (lost overlap)
    int prefill_chunk = 0;                    // tokens per prefill chunk
    int64_t chunk_expert_disk_bytes = 0;      // per chunk: the union of its tokens' experts, missed
    double chunk_compute_seconds = 0;
    ChunkCompute chunk_stages;                // chunk_compute_seconds by stage (attention over the chunk itself included)
    double chunk_read_seconds = 0;            // trunk and expert reads of a chunk, overlapped with its compute
    double chunk_exposed_seconds = 0;         // what cannot overlap: the first batch of experts, ring stalls
    double chunk_seconds = 0;                 // max(reads, compute) + exposed
    // what a pass borrows (io::MemoryPlan::loan_for) and the reads that costs
    int64_t pass_lent_bytes = 0;
    int pass_unpinned_layers = 0;             // pinned layers the pass unpins, each read once in it (waited for)
    int64_t pass_unpinned_bytes = 0;
    int64_t pass_lm_head_bytes = 0;           // the lm_head, when lent: read again before the output product
    double lm_head_read_seconds = 0;          // (in chunk_seconds: once a pass that borrows it)
    std::string chunk_bound;                  // "disk reads" or "compute": the larger of the two
    double prefill_tokens_per_s = 0;
    double chunk_expert_part_seconds = 0;     // of a chunk, the routed experts' reads or compute, the larger
};

Projection project(const ModelSizes& m, const io::MemoryPlan& plan, const Bandwidths& b, int prefill_chunk,
                   RankPart part = {});

// Time to first token for a prompt of `tokens` tokens from an empty cache: its chunks in turn,
// each costing its reads or its compute (chunk_compute: every stage, with its MLA attention over
// every position before it), whichever is larger, plus what cannot overlap (Projection's chunk
// model). The first token is sampled from the last chunk's logits, so this is the whole wait.
struct PromptEstimate {
    int64_t tokens = 0;
    int chunks = 0;
    double seconds = 0;            // time to first token
    double attention_seconds = 0;  // the MLA attention in it (inside the chunks' compute)
    double read_seconds = 0;       // the chunks' reads
    double compute_seconds = 0;    // the chunks' compute, attention included
    int read_bound_chunks = 0;     // chunks whose reads take longer than their compute
    int pass_tokens = 0;           // tokens of a full pass (the plan's)
    int64_t pass_read_bytes = 0;   // what a full pass reads from disk (trunk, experts, what it borrowed)
    int unpinned_layer_reads = 0;  // pinned layers read during the passes (each pass's, summed)
    double lm_head_read_seconds = 0;  // the lent lm_head read again, in every pass that borrowed it
    ForwardStageSeconds stage_seconds{};  // the compute by stage, as the run report's forward_stage_seconds
};
// Under expert parallelism, `part` is rank 0's, and `wait_others` what a pass of n tokens adds
// waiting for the other ranks beyond rank 0's own experts (rank_projection.h).
PromptEstimate estimate_prompt(const ModelSizes& m, const io::MemoryPlan& plan, const Bandwidths& b, int64_t tokens,
                               RankPart part = {},
                               const std::function<double(int64_t n, const Projection& rank0)>& wait_others = {});

}  // namespace k3::cli
