// The per-layer exchange of expert parallelism without the experts (`k3serve netbench`,
// docs/operations.md "Several machines"): rank 0 sends every other rank what it sends for one
// MoE layer of a pass of T tokens (mpi_wire.h: kWork, the rows' tokens, the pass's latent
// inputs) and waits for each rank's kDone and its rows' outputs, which the ranks send back at
// once, of the size their share of the experts gives (the same count as `plan --ranks`,
// cli/rank_projection.h). What it times is the network and MPI alone, so that its figures can be
// set beside plan's --net-latency-us and --net-gbit and beside a real job's expert_exchange_*.
#pragma once
#include <cstdint>
#include <vector>

#include "store/expert_share.h"

namespace k3::parallel {

// One layer's exchange for a pass of `tokens` tokens.
struct ExchangeShape {
    int tokens = 1;
    int64_t width = 0;         // routed_expert_hidden_size: floats in a latent input and an output row
    int experts_per_token = 0; // num_experts_per_token
    int n_experts = 0;         // num_experts of a layer
};

// The rows rank `rank` of `ranks` computes for a pass: top-k x its share of the pool for each
// token, rounded (the router spreads a token's experts over the pool; the expected count).
int64_t expected_rows(const ExchangeShape& s, int rank, int ranks);

// The bytes rank 0's expert_exchange_bytes counts for the layer: each other rank's latent
// inputs and rows' tokens out, its outputs back (kWork and kDone are not counted).
int64_t exchange_layer_bytes(const ExchangeShape& s, int ranks);

struct ExchangeTiming {
    int tokens = 0;
    int64_t bytes = 0;   // a layer's (exchange_layer_bytes)
    int rounds = 0;
    double min_us = 0, median_us = 0, p90_us = 0;
};

// Rank 0: after a few rounds of warm-up, rounds of each shape for about `seconds_each` (at least
// 5), every other rank at once; returns the timings. The other ranks answer until rank 0 is done
// and return nothing. Every wait has a deadline (K3_RANK_TIMEOUT_S): a rank that does not answer
// is a k3::Error(Io) naming it. Throws k3::Error(Usage) built without MPI or in a job of one rank.
std::vector<ExchangeTiming> netbench(ExpertShare world, const std::vector<ExchangeShape>& shapes, double seconds_each);

}  // namespace k3::parallel
