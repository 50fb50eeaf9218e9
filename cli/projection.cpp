// The projection behind `doctor` and `plan` (projection.h).
#include "cli/projection.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "io/file.h"
#include "store/ring_schedule.h"
#include "weights/chunk_size.h"
#include "weights/model_tensors.h"

namespace k3::cli {

int64_t ModelSizes::trunk() const { return std::accumulate(layer_bytes.begin(), layer_bytes.end(), int64_t(0)); }

ModelSizes sizes_of(const ModelConfig& c, std::string name) {
    ModelSizes m;
    m.name = std::move(name);
    m.config = c;
    for (const auto& t : model_tensors(c)) {
        if (t.role == TensorRole::Embed) m.resident += t.nbytes(), m.embed += t.nbytes();
        if (t.role == TensorRole::ModelNorm) m.resident += t.nbytes();
        if (t.role == TensorRole::LmHead) m.resident += t.nbytes(), m.lm_head += t.nbytes();
    }
    for (int il = 0; il < c.num_hidden_layers; ++il) {
        int64_t b = 0;
        for (const auto& t : layer_trunk_tensors(c, il)) b += t.nbytes();
        m.layer_bytes.push_back(b);
        m.moe_layers += c.is_dense(il) ? 0 : 1;
    }
    m.one_expert = expert_bytes(c);
    m.pool = m.one_expert * m.moe_layers * c.num_experts;
    return m;
}

io::ModelFootprint footprint_of(const ModelSizes& m) {
    io::ModelFootprint f;
    for (int64_t b : m.layer_bytes) f.layer_alloc_bytes.push_back(int64_t(io::window_capacity(b)));
    f.expert_slot_bytes = m.moe_layers > 0 ? int64_t(io::window_capacity(m.one_expert)) : 0;
    f.routed_experts = int64_t(m.moe_layers) * m.config.num_experts;
    f.experts_per_token = m.config.num_experts_per_token;
    f.resident_bytes = m.resident - m.embed;
    f.lm_head_bytes = m.lm_head;
    f.pass = pass_cost(m.config);
    f.default_chunk_tokens = chunk_tokens_for(m.config);
    return f;
}

namespace {

// Time for reads and compute where some reads cannot overlap: `exposed_read` (reads that start
// only after the layer before them is released) and the `exposed_share` of the compute (those
// layers' predecessors) run one after the other; the rest overlap.
double overlapped_seconds(double read, double compute, double exposed_read, double exposed_share) {
    return exposed_read + compute * exposed_share + std::max(read - exposed_read, compute * (1 - exposed_share));
}

// The routed experts the store hands out at a time: the whole layer resident, top-k streamed
// (resident_store.cpp, streaming_store.cpp).
int max_experts_per_batch(const io::MemoryPlan& plan, const ModelConfig& c) {
    return plan.streaming ? c.num_experts_per_token : c.num_experts;
}

}  // namespace

ModelRates rates_of(const Bandwidths& b) {
    ModelRates r = b.model;
    if (!r.measured()) {
        r = ModelRates{};
        r.bf16_gflops = {{1, b.gflops}};
        r.expert_gflops = {{1, b.gflops}};
        r.attention_gflops = b.attention_gflops > 0 ? b.attention_gflops : b.gflops;
        if (b.attention_gflops <= 0 && !b.attention_gflops_by_keys.empty()) {
            r.attention_gflops_by_keys = b.attention_gflops_by_keys;
            r.attention_gflops = b.attention_gflops_by_keys.front().second;
        }
    } else if (b.attention_gflops > 0) {
        // given for the whole machine, at every context; the model's rates are one thread's
        r.attention_gflops = b.attention_gflops / std::max(1.0, r.work.parallel_speedup);
        r.attention_gflops_by_keys.clear();
    }
    r.mem_gbps = b.mem_gbps;
    return r;
}

Projection project(const ModelSizes& m, const io::MemoryPlan& plan, const Bandwidths& b, int prefill_chunk,
                   RankPart part) {
    Projection p;
    p.need = plan.need_bytes;
    const auto& c = m.config;
    // A rank computes its share of the experts: of a token's K per layer, K x share on average
    // (the router spreads them over the pool), and caches only its share of the pool.
    const double K = c.num_experts_per_token * part.experts, N = c.num_experts;
    const double expert = double(m.one_expert);
    const int n = int(m.layer_bytes.size());
    std::vector<char> streamed(size_t(n), 0);
    for (int il = 0; il < n; ++il) {
        const bool pinned = !plan.streaming || (size_t(il) < plan.trunk.pinned.size() && plan.trunk.pinned[size_t(il)]);
        streamed[size_t(il)] = part.trunk && !pinned;
    }
    // What the ring does over a steady walk (ring_schedule.h): which streamed layers are read
    // again every token (a layer that never has to give its bytes away stays in the ring and is
    // read once), and which reads start only when the layer before them is released.
    io::RingWalk walk;
    if (plan.streaming && plan.trunk.ring_bytes > 0) {
        std::vector<int64_t> alloc;
        int64_t ring = plan.trunk.ring_bytes;
        for (int il = 0; il < n; ++il) {
            alloc.push_back(int64_t(io::window_capacity(m.layer_bytes[size_t(il)])));
            // (a plan made from a checkpoint's runs holds them; these sizes may differ by a page)
            if (streamed[size_t(il)]) ring = std::max(ring, io::align_up(alloc.back(), io::kRingAlign));
        }
        walk = io::simulate_ring_walk(streamed, alloc, ring);
    } else {
        walk.overlapped.assign(size_t(n), 1);
        walk.reread = streamed;
    }
    double streamed_bytes = 0;
    for (int il = 0; il < n; ++il)
        if (streamed[size_t(il)] && walk.reread[size_t(il)]) streamed_bytes += double(m.layer_bytes[size_t(il)]);
    p.kept_layers = walk.kept_layers;
    const double streamed_read = streamed_bytes * b.compress_ratio;
    const double pool_slots = double(m.moe_layers) * N * part.experts;
    // The layer being evaluated holds its own top-k slots; the rest of the cache serves hits.
    p.expert_hit = !plan.streaming || pool_slots == 0 ? 1.0 : std::clamp((plan.cache_slots - K) / pool_slots, 0.0, 1.0);
    const double experts_per_token = K * m.moe_layers;
    p.trunk_disk_bytes = int64_t(streamed_read);
    p.expert_disk_bytes = int64_t(experts_per_token * (1 - p.expert_hit) * expert);
    p.disk_bytes_per_token = p.trunk_disk_bytes + p.expert_disk_bytes;
    p.memory_bytes_per_token = (part.trunk ? m.trunk() + m.lm_head : 0) + int64_t(experts_per_token * expert);
    p.trunk_seconds = streamed_read / (b.disk_gbps * 1e9);
    p.expert_seconds = double(p.expert_disk_bytes) / (b.expert_gbps * 1e9);
    p.memory_seconds = double(p.memory_bytes_per_token) / (b.mem_gbps * 1e9);

    // Where the ring cannot hold a layer beside the one before it, that layer's read starts only
    // when the one before is released: its read and the compute of the layer before it do not
    // overlap anything.
    double exposed_bytes = 0, exposed_sweep = 0;
    for (int il = 0; il < n; ++il) {
        if (!streamed[size_t(il)] || walk.overlapped[size_t(il)]) continue;
        p.waiting_layers++;
        exposed_bytes += double(m.layer_bytes[size_t(il)]) * b.compress_ratio;
        const int before = (il + n - 1) % n;
        exposed_sweep += double(m.layer_bytes[size_t(before)]) + (c.is_dense(before) ? 0.0 : K * expert);
    }
    const double exposed_read = exposed_bytes / (b.disk_gbps * 1e9);
    const double exposed_share = p.memory_bytes_per_token > 0 ? exposed_sweep / double(p.memory_bytes_per_token) : 0;
    const double trunk_and_memory = overlapped_seconds(p.trunk_seconds, p.memory_seconds, exposed_read, exposed_share);
    p.wait_seconds = trunk_and_memory - std::max(p.trunk_seconds, p.memory_seconds);
    p.seconds_per_token = trunk_and_memory + p.expert_seconds;
    p.expert_part_seconds = p.expert_seconds + experts_per_token * expert / (b.mem_gbps * 1e9);

    // A prefill chunk streams the trunk once and reads the union of the experts its tokens chose.
    const int T = std::max(1, prefill_chunk);
    p.prefill_chunk = T;
    const double K_all = c.num_experts_per_token;
    const double union_per_layer = N > 0 ? N * part.experts * (1 - std::pow(1 - K_all / N, double(T))) : 0;
    const double chunk_experts = double(m.moe_layers) * union_per_layer * expert;
    p.chunk_expert_disk_bytes = int64_t(chunk_experts * (1 - p.expert_hit));
    // The chunk's compute at this machine's rates, stage by stage (chunk_compute.h), but for its
    // attention over itself (estimate_prompt adds each chunk's); the memory it sweeps is a floor.
    p.chunk_stages = chunk_compute(c, rates_of(b), T, 0, max_experts_per_batch(plan, c));
    // A rank computes its share of the routed experts' products, and the rest only on rank 0.
    // (Rank 0's is written as a subtraction of the others' share, so that a whole model's is
    // exactly what one process has always been charged.)
    const double experts_all = p.chunk_stages.seconds[size_t(ForwardStage::Experts)];
    const double experts_s = experts_all * part.experts;
    const double compute_s = part.trunk ? p.chunk_stages.total() - p.chunk_stages.attention_seconds -
                                              experts_all * (1 - part.experts)
                                        : experts_s;
    const double sweep_s = (double(part.trunk ? m.trunk() + m.lm_head : 0) + chunk_experts) / (b.mem_gbps * 1e9);
    p.chunk_compute_seconds = std::max(compute_s, sweep_s);
    // The prefill pipeline (model/moe.cpp) reads the next batch of experts while one computes,
    // and the next layer's first batch during a layer's last, beside the ring's trunk reads: one
    // disk serves both, so the chunk costs the larger of all its reads and its compute, plus what
    // cannot overlap: the chunk's first batch of experts (nothing computes before it) and the
    // ring's reads that wait for the layer before them.
    const double expert_read_s = double(p.chunk_expert_disk_bytes) / (b.expert_gbps * 1e9);
    p.chunk_read_seconds = p.trunk_seconds + expert_read_s;
    const double first_batch_s =
        std::min(expert_read_s, K * expert * (1 - p.expert_hit) / (b.expert_gbps * 1e9));
    p.chunk_exposed_seconds = first_batch_s + exposed_read + p.chunk_compute_seconds * exposed_share;
    // What the pass borrows (MemoryPlan::loan_for): a pinned layer it unpins is read when the pass
    // reaches it, and the pass waits for that read; a lent lm_head is read again before the
    // pass's output product (every pass leaves its last token's logits, for the prompt cache).
    // Only rank 0 runs the passes (the other ranks of expert parallelism compute experts).
    const io::PassLoan loan = part.trunk ? plan.loan_for(pass_cost(c).bytes(T)) : io::PassLoan{};
    for (int il : loan.layers) p.pass_unpinned_bytes += m.layer_bytes[size_t(il)];
    p.pass_unpinned_layers = int(loan.layers.size());
    p.pass_lm_head_bytes = loan.lm_head ? m.lm_head : 0;
    p.pass_lent_bytes = loan.bytes;
    p.chunk_exposed_seconds += double(p.pass_unpinned_bytes) * b.compress_ratio / (b.disk_gbps * 1e9);
    p.lm_head_read_seconds = double(p.pass_lm_head_bytes) / (b.disk_gbps * 1e9);
    p.chunk_seconds = std::max(p.chunk_read_seconds, p.chunk_compute_seconds) + p.chunk_exposed_seconds + p.lm_head_read_seconds;
    p.chunk_bound = p.chunk_read_seconds > p.chunk_compute_seconds ? "disk reads" : "compute";
    p.prefill_tokens_per_s = T / p.chunk_seconds;
    p.chunk_expert_part_seconds = std::max(expert_read_s, experts_s);
    return p;
}

PromptEstimate estimate_prompt(const ModelSizes& m, const io::MemoryPlan& plan, const Bandwidths& b, int64_t tokens,
                               RankPart part, const std::function<double(int64_t n, const Projection& rank0)>& wait_others) {
    PromptEstimate e;
    e.tokens = tokens;
    const ModelRates rates = rates_of(b);
    const int T = std::max(1, plan.chunk_tokens);
    const Projection full = project(m, plan, b, T, part);
    e.pass_tokens = T;
    e.pass_read_bytes = full.trunk_disk_bytes + full.chunk_expert_disk_bytes + full.pass_unpinned_bytes + full.pass_lm_head_bytes;

    for (int64_t p0 = 0; p0 < tokens; p0 += T) {
        const int64_t n = std::min<int64_t>(T, tokens - p0);
        const Projection p = n == T ? full : project(m, plan, b, int(n), part);
        // the chunk's compute with its queries attending to every position before them
        const ChunkCompute at = chunk_compute(m.config, rates, n, p0, max_experts_per_batch(plan, m.config));
        const double compute = p.chunk_compute_seconds + at.attention_seconds;
        e.chunks++;
        e.attention_seconds += at.attention_seconds;
        e.read_seconds += p.chunk_read_seconds;
        e.compute_seconds += compute;
        for (size_t s = 0; s < e.stage_seconds.size(); ++s) e.stage_seconds[s] += at.seconds[s];
        e.read_bound_chunks += p.chunk_read_seconds > compute ? 1 : 0;
        e.seconds += std::max(p.chunk_read_seconds, compute) + p.chunk_exposed_seconds + p.lm_head_read_seconds;
        if (wait_others) e.seconds += wait_others(n, p);
        e.unpinned_layer_reads += p.pass_unpinned_layers;
        e.lm_head_read_seconds += p.lm_head_read_seconds;
    }
    return e;
}

}  // namespace k3::cli
