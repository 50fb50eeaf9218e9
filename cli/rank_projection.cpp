// The projection of expert parallelism behind `plan --ranks N` (rank_projection.h).
#include "cli/rank_projection.h"

#include <algorithm>

#include "k3/error.h"
#include "parallel/netbench.h"
#include "store/expert_share.h"

namespace k3::cli {

namespace {

RankPart part_of(const ModelConfig& c, int rank, int ranks) {
    const ExpertShare share{rank, ranks};
    return RankPart{c.num_experts > 0 ? double(share.count(c.num_experts)) / c.num_experts : 0, rank == 0};
}

double exchange_seconds(const ModelSizes& m, const Network& net, int ranks, int64_t tokens) {
    if (ranks < 2) return 0;
    const double bytes = double(exchange_bytes(m.config, ranks, tokens));
    return m.moe_layers * (bytes / (net.gbit * 1e9 / 8) + net.latency_us * 1e-6);
}

}  // namespace

std::vector<io::MemoryPlan> rank_plans(const ModelSizes& m, const MemoryOptions& options, int64_t available, int ranks) {
    return rank_plans(m, options, std::vector<int64_t>(size_t(std::max(ranks, 0)), available));
}

std::vector<io::MemoryPlan> rank_plans(const ModelSizes& m, const MemoryOptions& options,
                                       const std::vector<int64_t>& available) {
    const int ranks = int(available.size());
    std::vector<io::MemoryPlan> plans;
    for (int r = 0; r < ranks; ++r) {
        MemoryOptions o = options;
        o.expert_rank = r;
        o.expert_ranks = ranks;
        try {
            plans.push_back(io::make_memory_plan(
                io::share_footprint(footprint_of(m), ExpertShare{r, ranks}, m.config.num_experts), o,
                available[size_t(r)]));
        } catch (const Error& e) {
            throw Error(e.kind(), "rank " + std::to_string(r) + ": " + e.what());
        }
    }
    return plans;
}

int64_t exchange_bytes(const ModelConfig& c, int ranks, int64_t tokens) {
    return parallel::exchange_layer_bytes(
        {int(tokens), c.routed_expert_hidden_size, c.num_experts_per_token, c.num_experts}, ranks);
}

RanksProjection project_ranks(const ModelSizes& m, const std::vector<io::MemoryPlan>& plans, const Bandwidths& b,
                              const Network& net) {
    return project_ranks(m, plans, std::vector<Bandwidths>(plans.size(), b), net);
}

RanksProjection project_ranks(const ModelSizes& m, const std::vector<io::MemoryPlan>& plans,
                              const std::vector<Bandwidths>& machines, const Network& net) {
    RanksProjection r;
    r.ranks = int(plans.size());
    r.plans = plans;
    r.machines = machines;
    r.machines.resize(plans.size(), machines.empty() ? Bandwidths{} : machines.back());
    r.pass_tokens = std::max(1, plans.at(0).chunk_tokens);
    for (int k = 0; k < r.ranks; ++k) {
        r.parts.push_back(part_of(m.config, k, r.ranks));
        // every rank's part of rank 0's pass
        r.projections.push_back(project(m, plans[size_t(k)], r.machines[size_t(k)], r.pass_tokens, r.parts.back()));
    }
    const Projection& p0 = r.projections[0];
    r.exchange_bytes_per_layer = exchange_bytes(m.config, r.ranks, 1);
    r.exchange_seconds_per_token = exchange_seconds(m, net, r.ranks, 1);
    // Rank 0's own experts and the others' (with the exchange) run side by side; the rest of a
    // token is rank 0's alone.
    double others = 0;
    for (int k = 1; k < r.ranks; ++k) others = std::max(others, r.projections[size_t(k)].seconds_per_token);
    // (written as an addition, so that one rank is exactly the one-machine projection)
    r.seconds_per_token =
        p0.seconds_per_token +
        (r.ranks > 1 ? std::max(0.0, others + r.exchange_seconds_per_token - p0.expert_part_seconds) : 0.0);
    r.pass_exchange_bytes = int64_t(m.moe_layers) * exchange_bytes(m.config, r.ranks, r.pass_tokens);
    r.pass_exchange_seconds = exchange_seconds(m, net, r.ranks, r.pass_tokens);
    r.pass_seconds = p0.chunk_seconds + wait_for_others(m, r, net, r.pass_tokens, p0);
    r.prefill_tokens_per_s = r.pass_tokens / r.pass_seconds;
    return r;
}

double wait_for_others(const ModelSizes& m, const RanksProjection& r, const Network& net, int64_t n,
                       const Projection& rank0) {
    if (r.ranks < 2) return 0;
    double others = 0;
    for (int k = 1; k < r.ranks; ++k) {
        const Projection p = n == r.pass_tokens ? r.projections[size_t(k)]
                                                : project(m, r.plans[size_t(k)], r.machines[size_t(k)], int(n),
                                                          r.parts[size_t(k)]);
        others = std::max(others, p.chunk_seconds);
    }
    return std::max(0.0, others + exchange_seconds(m, net, r.ranks, n) - rank0.chunk_expert_part_seconds);
}

}  // namespace k3::cli
