// `plan --ranks N`: what expert parallelism over N machines (docs/operations.md "Several
// machines") is expected to give, from each rank's memory plan, each machine's figures (its own
// disk, memory and cores: alike by default, or each rank's memory and disk given) and the
// network's.
// Per MoE layer rank 0 computes its share of the experts while the other ranks compute theirs
// and the exchange goes both ways (engine/parallel/mpi_wire.h: each rank gets the pass's latent
// inputs and a token index per row, and sends back its rows' outputs); a token or pass waits for
// the slower of the two. docs/performance.md, "Expert parallelism".
#pragma once
#include <cstdint>
#include <vector>

#include "cli/projection.h"
#include "k3/options.h"
#include "store/memory_plan.h"

namespace k3::cli {

struct Network {
    double gbit = 10;         // bandwidth each way, Gbit/s
    double latency_us = 50;   // a layer's round trip, microseconds
};

struct RanksProjection {
    int ranks = 1;
    std::vector<io::MemoryPlan> plans;     // [rank]
    std::vector<Bandwidths> machines;      // [rank]
    std::vector<RankPart> parts;           // [rank]
    std::vector<Projection> projections;   // [rank] its part of a token and of a pass
    int64_t exchange_bytes_per_layer = 0;  // a decoded token's, rank 0 with all the others
    double exchange_seconds_per_token = 0; // over the MoE layers: bytes and round trips
    double seconds_per_token = 0;
    int pass_tokens = 0;                   // rank 0's pass
    int64_t pass_exchange_bytes = 0;       // a full pass's, over the MoE layers
    double pass_exchange_seconds = 0;
    double pass_seconds = 0;
    double prefill_tokens_per_s = 0;
};

// Each rank's memory plan for `available` bytes with `options` (the memory plan's refusal
// applies to each: k3::Error naming the rank).
std::vector<io::MemoryPlan> rank_plans(const ModelSizes& m, const MemoryOptions& options, int64_t available, int ranks);
// The same with each rank's own MemAvailable ([rank]).
std::vector<io::MemoryPlan> rank_plans(const ModelSizes& m, const MemoryOptions& options,
                                       const std::vector<int64_t>& available);

// Bytes exchanged for one MoE layer of a pass of `tokens` tokens: the count of
// engine/parallel/netbench.h (the wire's messages, mpi_wire.h), which `k3serve netbench` times.
int64_t exchange_bytes(const ModelConfig& c, int ranks, int64_t tokens);

// Every machine at `b`'s figures, or each at its own (`machines`, [rank], as many as plans).
RanksProjection project_ranks(const ModelSizes& m, const std::vector<io::MemoryPlan>& plans, const Bandwidths& b,
                              const Network& net);
RanksProjection project_ranks(const ModelSizes& m, const std::vector<io::MemoryPlan>& plans,
                              const std::vector<Bandwidths>& machines, const Network& net);

// What a pass of n tokens adds waiting for the other ranks beyond rank 0's own experts
// (estimate_prompt's wait_others).
double wait_for_others(const ModelSizes& m, const RanksProjection& r, const Network& net, int64_t n,
                       const Projection& rank0);

}  // namespace k3::cli
