#include "store/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>

#include "io/file.h"
#include "store/ring_schedule.h"
#include "weights/chunk_size.h"
#include "weights/model_tensors.h"
#include "k3/error.h"

namespace k3::io {

namespace {

constexpr PresetBudget kPresets[] = {
    {"laptop", 3.0, 1.0, 512},     {"desktop", 16.0, 10.0, 2000}, {"workstation", 60.0, 30.0, 4000},
    {"server", 110.0, 13.0, 4000}, {"max", 110.0, 109.0, 8000},
};

// auto keeps this much of MemAvailable for everything that is not weights (KV rows, KDA state,
// activations, the OS): 2 GB plus 2% of what is available.
constexpr double kAutoFixedReserveGB = 2.0;
constexpr double kAutoReserveFraction = 0.02;

int64_t gb_to_bytes(double gb) { return int64_t(std::llround(gb * kGB)); }

std::string preset_names() {
    std::string s;
    for (const auto& p : kPresets) s += std::string(s.empty() ? "" : ", ") + std::string(p.name);
    return s + ", auto";
}

int64_t sum(std::span<const int64_t> v) { return std::accumulate(v.begin(), v.end(), int64_t(0)); }

}  // namespace

std::span<const PresetBudget> memory_presets() { return kPresets; }

std::string format_gb(int64_t bytes) {
    char buf[32];
    if (bytes != 0 && bytes < int64_t(kGB / 10))
        std::snprintf(buf, sizeof buf, "%.1f MB", double(bytes) / 1e6);
    else
        std::snprintf(buf, sizeof buf, "%.2f GB", double(bytes) / kGB);
    return buf;
}

namespace {

// A layer's bytes in the ring (ring_schedule.h rounds each up to kRingAlign).
int64_t ring_size(int64_t bytes) { return align_up(std::max<int64_t>(bytes, 1), kRingAlign); }

// The ring that holds every two consecutive streamed layers of the walk (wrapping from the last
// to the first): then each layer's read can run while the one before it computes. 0 when
// nothing streams.
int64_t overlap_ring_bytes(std::span<const int64_t> alloc, const std::vector<char>& pinned) {
    std::vector<int64_t> streamed;
    for (size_t il = 0; il < alloc.size(); ++il)
        if (!pinned[il]) streamed.push_back(ring_size(alloc[il]));
    if (streamed.size() <= 1) return streamed.empty() ? 0 : streamed[0];
    int64_t need = 0;
    for (size_t i = 0; i < streamed.size(); ++i) need = std::max(need, streamed[i] + streamed[(i + 1) % streamed.size()]);
    return need;
}

TrunkPlan finish_plan(std::span<const int64_t> alloc, std::vector<char> pinned, int64_t budget) {
    TrunkPlan plan;
    plan.pinned = std::move(pinned);
    std::vector<char> streamed(plan.pinned.size());
    for (size_t il = 0; il < alloc.size(); ++il) {
        streamed[il] = !plan.pinned[il];
        if (plan.pinned[il]) {
            plan.n_pinned++;
            plan.pinned_bytes += alloc[il];
        } else {
            plan.streamed_layers++;
        }
    }
    plan.ring_bytes = align_down(budget - plan.pinned_bytes, kRingAlign);
    const RingWalk walk = simulate_ring_walk(streamed, alloc, plan.ring_bytes);
    plan.ring_min_ahead = walk.min_ahead;
    plan.ring_max_ahead = walk.max_ahead;
    plan.ring_waiting_layers = walk.waiting_layers;
    plan.ring_kept_layers = walk.kept_layers;
    for (size_t il = 0; il < alloc.size(); ++il)
        if (streamed[il] && !walk.reread[il]) plan.ring_kept_bytes += alloc[il];
    return plan;
}

}  // namespace

TrunkPlan plan_trunk(std::span<const int64_t> alloc, int64_t budget) {
    const int n = int(alloc.size());
    const int64_t total = sum(alloc);
    if (budget >= total) {  // everything fits: the trunk is resident, no ring
        TrunkPlan all;
        all.pinned.assign(size_t(n), 1);
        all.n_pinned = n;
        all.pinned_bytes = total;
        return all;
    }
    if (align_down(budget, kRingAlign) < smallest_trunk_budget(alloc)) {
        const int64_t cheapest = smallest_trunk_budget(alloc);
        throw Error(ErrorKind::Usage, "trunk budget " + format_gb(budget) +
                                          " is too small: streaming the trunk needs a read ring that holds its largest "
                                          "layer, at least " + format_gb(cheapest) + " for this model; raise --trunk-gb to at least " +
                                          format_gb(cheapest));
    }
    // Layers by size, largest first (ties: lower index first, so plans are reproducible).
    std::vector<int> by_size(alloc.size());
    std::iota(by_size.begin(), by_size.end(), 0);
    std::stable_sort(by_size.begin(), by_size.end(), [&](int a, int b) { return alloc[a] > alloc[b]; });

    std::vector<char> best;
    int64_t best_pinned = -1;
    for (int k = 0; k < n; ++k) {
        // Pin the k largest, then any smaller layers that still leave an overlapping ring, largest
        // first (never by_size[k] itself: pinning it is the k+1 case).
        std::vector<char> pinned(size_t(n), 0);
        int64_t spent = 0;
        for (int j = 0; j < k; ++j) {
            pinned[by_size[j]] = 1;
            spent += alloc[by_size[j]];
        }
        if (spent + overlap_ring_bytes(alloc, pinned) > budget) continue;
        for (int j = k + 1; j < n; ++j) {
            pinned[by_size[j]] = 1;
            if (spent + alloc[by_size[j]] + overlap_ring_bytes(alloc, pinned) <= budget)
                spent += alloc[by_size[j]];
            else
                pinned[by_size[j]] = 0;
        }
        if (spent > best_pinned) {
            best = pinned;
            best_pinned = spent;
        }
    }
    // No overlapping ring fits: nothing pinned, the budget is all ring.
    if (best_pinned < 0) best.assign(size_t(n), 0);
    return finish_plan(alloc, std::move(best), budget);
}

int64_t smallest_trunk_budget(std::span<const int64_t> alloc) {
    int64_t largest = 0;
    for (int64_t b : alloc) largest = std::max(largest, ring_size(b));
    return largest;
}

std::string TrunkPlan::describe_ring() const {
    std::ostringstream s;
    s << "ring " << format_gb(ring_bytes) << " (";
    if (ring_max_ahead == 0 && ring_waiting_layers == streamed_layers) {
        s << "one layer at a time: each read waits for the layer before it";
    } else {
        s << "reads " << (ring_min_ahead == ring_max_ahead ? "" : "up to ") << ring_max_ahead << " layer"
          << (ring_max_ahead == 1 ? "" : "s") << " ahead";
        if (ring_waiting_layers > 0)
            s << "; " << ring_waiting_layers << " of " << streamed_layers
              << " streamed layers read only after the layer before it";
    }
    if (ring_kept_layers > 0)
        s << "; " << ring_kept_layers << " of " << streamed_layers << " streamed layer" << (streamed_layers == 1 ? "" : "s")
          << " stay" << (ring_kept_layers == 1 ? "s" : "") << " in it, read once";
    s << ")";
    return s.str();
}

ModelFootprint footprint_of(const Checkpoint& ckpt) {
    const ModelConfig& cfg = ckpt.config;
    ModelFootprint f;
    for (const auto& run : ckpt.layer_runs) f.layer_alloc_bytes.push_back(int64_t(window_capacity(run.nbytes)));
    int moe_layers = 0;
    for (int il = 0; il < cfg.num_hidden_layers; ++il)
        if (!cfg.is_dense(il)) moe_layers++;
    f.routed_experts = int64_t(moe_layers) * cfg.num_experts;
    f.experts_per_token = cfg.num_experts_per_token;
    f.expert_slot_bytes = moe_layers > 0 ? int64_t(window_capacity(expert_bytes(cfg))) : 0;
    f.pass = pass_cost(cfg);
    f.default_chunk_tokens = chunk_tokens_for(cfg);
    for (const auto& t : model_tensors(cfg)) {
        if (t.role == TensorRole::LmHead || t.role == TensorRole::ModelNorm)  // the embedding stays on disk (model.h)
            f.resident_bytes += t.nbytes();
        if (t.role == TensorRole::LmHead) f.lm_head_bytes += t.nbytes();
    }
    for (const auto& t : vision_tensors(cfg)) f.vision_bytes += t.nbytes();
    return f;
}

ModelFootprint share_footprint(ModelFootprint model, ExpertShare share, int experts_per_layer) {
    if (experts_per_layer > 0) model.routed_experts = model.routed_experts / experts_per_layer * share.count(experts_per_layer);
    return model;
}

int64_t prompt_cache_budget(const MemoryOptions& o) {
    if (o.prompt_cache_gb >= 0) return gb_to_bytes(o.prompt_cache_gb);
    constexpr std::pair<std::string_view, double> kPromptCacheGB[] = {
        {"laptop", 0.5}, {"desktop", 2.0}, {"workstation", 8.0}, {"server", 8.0}, {"max", 8.0}, {"auto", 0.5}};
    for (const auto& [name, gb] : kPromptCacheGB)
        if (o.preset == name) return gb_to_bytes(gb);
    return gb_to_bytes(1.0);
}

int64_t prompt_cache_disk_budget(const MemoryOptions& o) {
    if (o.prompt_cache_dir_gb >= 0) return gb_to_bytes(o.prompt_cache_dir_gb);
    return 8 * prompt_cache_budget(o);
}

bool wants_budget(const MemoryOptions& o) {
    return !o.preset.empty() || o.trunk_gb >= 0 || o.cache_gb >= 0 || !o.trunk_dir.empty();
}

PassLoan MemoryPlan::loan_for(int64_t bytes, bool lm_head_lendable) const {
    PassLoan loan;
    int64_t over = bytes - pass_own_bytes;
    if (over <= 0 || !streaming) return loan;
    // the expert cache's spare slots
    if (pass_lent_slots > 0 && cache_slot_bytes > 0) {
        loan.cache_slots = int(std::min<int64_t>(pass_lent_slots, (over + cache_slot_bytes - 1) / cache_slot_bytes));
        loan.bytes += int64_t(loan.cache_slots) * cache_slot_bytes;
        over -= int64_t(loan.cache_slots) * cache_slot_bytes;
    }
    // the lm_head
    if (over > 0 && lm_head_lendable && pass_lm_head_bytes > 0) {
        loan.lm_head = true;
        loan.bytes += pass_lm_head_bytes;
        over -= pass_lm_head_bytes;
    }
    // pinned layers, largest first; the first one unpinned frees nothing (the room of the layer
    // in use), so it is taken only together with a second
    int64_t unpinned = 0;
    for (size_t i = 0; over > 0 && i < pass_layers.size() && pass_layers.size() > 1; ++i) {
        const int64_t b = trunk_layer_bytes(pass_layers[i]);
        loan.layers.push_back(pass_layers[i]);
        unpinned += b;
        if (i > 0) over -= b;
    }
    if (!loan.layers.empty()) loan.bytes += unpinned - pass_layer_room;
    return loan;
}

int64_t MemoryPlan::lendable_bytes() const {
    if (!streaming) return 0;
    int64_t unpinned = 0;
    for (int il : pass_layers) unpinned += trunk_layer_bytes(il);
    return int64_t(pass_lent_slots) * cache_slot_bytes + pass_lm_head_bytes +
           (pass_layers.size() > 1 ? unpinned - pass_layer_room : 0);
}

std::string MemoryPlan::describe_pass() const {
    std::ostringstream s;
    s << "prefill pass " << chunk_tokens << " tokens (" << format_gb(prefill_bytes);
    const PassLoan full = loan_for(prefill_bytes);
    if (full.cache_slots > 0 && !full.lm_head && full.layers.empty()) {
        s << ", " << format_gb(int64_t(full.cache_slots) * cache_slot_bytes) << " of it lent by the expert cache";
    } else if (full.bytes > 0) {
        s << ", " << format_gb(full.bytes) << " of it lent by";
        const char* sep = " ";
        if (full.cache_slots > 0) {
            s << sep << "the expert cache (" << format_gb(int64_t(full.cache_slots) * cache_slot_bytes) << ")";
            sep = ", ";
        }
        if (full.lm_head) {
            s << sep << "the lm_head (" << format_gb(pass_lm_head_bytes) << ", read again once a pass)";
            sep = ", ";
        }
        if (!full.layers.empty())
            s << sep << full.layers.size() << " pinned trunk layer" << (full.layers.size() == 1 ? "" : "s")
              << " (each read once a pass)";
    }
    if (max_pass_tokens > 0 && chunk_tokens == max_pass_tokens) s << "; at most " << max_pass_tokens << " tokens (--pass-tokens)";
    s << ")";
    return s.str();
}

std::string MemoryPlan::describe() const {
    std::ostringstream s;
    if (!streaming) {
        s << "memory: everything resident (" << format_gb(need_bytes) << " of weights";
        if (vision_bytes > 0) s << " with the vision tower's " << format_gb(vision_bytes);
        s << "; prompt cache "
          << format_gb(prompt_cache_budget) << "; " << describe_pass() << ")";
        if (!prompt_cache_dir.empty())
            s << "; prompt cache on disk: " << prompt_cache_dir << " up to " << format_gb(prompt_cache_disk_budget);
        return s.str();
    }
    s << "memory (" << source << "): trunk " << format_gb(trunk.total_bytes()) << " = " << trunk.n_pinned << "/"
      << trunk.pinned.size() << " layers pinned (" << format_gb(trunk.pinned_bytes) << ")";
    if (trunk.ring_bytes > 0) s << " + " << trunk.describe_ring();
    s << "; expert cache " << cache_slots << " slots x " << format_gb(cache_slot_bytes) << " = "
      << format_gb(int64_t(cache_slots) * cache_slot_bytes) << "; lm_head/norms " << format_gb(resident_bytes)
      << (vision_bytes > 0 ? "; vision tower " + format_gb(vision_bytes) : std::string())
      << "; prompt cache " << format_gb(prompt_cache_budget) << "; " << describe_pass() << "; total " << format_gb(need_bytes) << " of " << format_gb(mem_available) << " available";
    if (!prompt_cache_dir.empty())
        s << "; prompt cache on disk: " << prompt_cache_dir << " up to " << format_gb(prompt_cache_disk_budget);
    return s.str();
}

namespace {

std::string format_mb(int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f MB", double(bytes) / 1e6);
    return buf;
}

// The prefill pass (docs/performance.md, "Prefill passes"): its own budget (--prefill-mb, the
// preset's, else the default 256 MB that auto's reserve and a plan without a budget keep outside
// the plan) plus what a streamed plan lends while a prompt prefills (MemoryPlan::loan_for: the
// expert cache's slots beyond the pipeline's two batches, the lm_head, the pinned trunk layers).
// As many tokens as that holds, at most --pass-tokens; a budget that holds not one token's state
// is refused, naming the option to raise.
void size_prefill_pass(const ModelFootprint& model, double prefill_mb, int max_pass_tokens, MemoryPlan& plan) {
    const PassCost& cost = model.pass;
    const int64_t own = prefill_mb >= 0 ? int64_t(prefill_mb * 1e6) : kDefaultPassBytes;
    const int pipeline_slots = std::min(plan.cache_slots, 2 * model.experts_per_token + 8);
    plan.pass_own_bytes = own;
    plan.max_pass_tokens = max_pass_tokens;
    if (plan.streaming) {
        plan.pass_lent_slots = plan.cache_slots - pipeline_slots;
        plan.pass_lm_head_bytes = model.lm_head_bytes;
        for (size_t il = 0; il < plan.trunk.pinned.size(); ++il)
            if (plan.trunk.pinned[il]) plan.pass_layers.push_back(int(il));
        // largest first (ties: lower index first)
        std::stable_sort(plan.pass_layers.begin(), plan.pass_layers.end(),
                         [&](int a, int b) { return model.layer_alloc_bytes[size_t(a)] > model.layer_alloc_bytes[size_t(b)]; });
        plan.trunk_layer_sizes = model.layer_alloc_bytes;
        plan.pass_layer_room = plan.pass_layers.empty() ? 0 : model.layer_alloc_bytes[size_t(plan.pass_layers[0])];
    }
    const int64_t budget = own + plan.lendable_bytes();
    plan.chunk_tokens = cost.tokens_within(budget);
    if (plan.chunk_tokens < 1)
        throw Error(ErrorKind::Usage, "a prefill pass of " + format_mb(budget) + " holds not one token: a token keeps " +
                                          format_mb(cost.per_token) + " and the pass's tiles take " +
                                          format_mb(cost.fixed_bytes(1)) + "; raise --prefill-mb to at least " +
                                          std::to_string(int64_t(std::ceil(double(cost.bytes(1) - budget + own) / 1e6))));
    if (max_pass_tokens > 0) plan.chunk_tokens = std::min(plan.chunk_tokens, max_pass_tokens);
    plan.chunk_tokens_keeping_lm_head =
        std::min(plan.chunk_tokens, std::max(0, cost.tokens_within(budget - plan.pass_lm_head_bytes)));
    plan.prefill_bytes = cost.bytes(plan.chunk_tokens);
    // the slots a full pass borrows at most (the store lends no more)
    plan.pass_lent_slots = plan.loan_for(plan.prefill_bytes).cache_slots;
}

}  // namespace

MemoryPlan make_memory_plan(const ModelFootprint& model, const MemoryOptions& options, int64_t mem_available) {
    MemoryPlan plan;
    plan.mem_available = mem_available;
    plan.trunk_dir = options.trunk_dir;
    plan.lookahead = options.lookahead;
    plan.resident_bytes = model.resident_bytes;
    plan.vision_bytes = model.vision_bytes;
    // A rank other than 0 of expert parallelism holds no trunk (step 2): auto gives it all to the cache.
    const int64_t trunk_total = options.expert_rank > 0 ? 0 : sum(model.layer_alloc_bytes);
    const int64_t pool_bytes = model.routed_experts * model.expert_slot_bytes;
    const int min_cache_slots = model.routed_experts > 0 ? model.experts_per_token + 1 : 0;

    // 1. The two budgets, as asked. Unset parts mean "as much as the model needs".
    int64_t trunk_budget = trunk_total, cache_budget = pool_bytes;
    double prefill_mb = -1;  // < 0: the default chunk
    plan.streaming = wants_budget(options);
    plan.source = "resident";
    if (!options.preset.empty()) {
        plan.source = "preset " + options.preset;
        if (options.preset == "auto") {
            double avail_gb = double(mem_available) / kGB;
            // (the prompt cache's default for auto comes out of the fixed reserve)
            int64_t reserve = gb_to_bytes(kAutoFixedReserveGB + kAutoReserveFraction * avail_gb) + model.resident_bytes +
                              model.vision_bytes;
            // Never more than the refusal limit below leaves: above about 66 GB the 2 GB + 2%
            // reserve is smaller than the 5% the limit keeps, and the real K3 at 128/256 GB was
            // refused by its own auto plan.
            const int64_t asked_prefill = options.prefill_mb >= 0 ? int64_t(options.prefill_mb * 1e6) : 0;
            const int64_t limit_left = int64_t(double(mem_available) * kRefuseAboveFraction) - model.resident_bytes - model.vision_bytes -
                                       prompt_cache_budget(options) - asked_prefill - 1;
            int64_t usable = std::min(mem_available - reserve, limit_left);
            int64_t min_cache = int64_t(min_cache_slots) * model.expert_slot_bytes;
            // Trunk first (a pinned byte saves a read every token), then the cache.
            trunk_budget = std::min(trunk_total, usable - min_cache);
            cache_budget = std::min(pool_bytes, usable - std::max<int64_t>(trunk_budget, 0));
            // The trunk needs at least a read ring of its largest layer (plan_trunk).
            const int64_t min_trunk = trunk_total > 0 ? std::min(trunk_total, smallest_trunk_budget(model.layer_alloc_bytes)) : 0;
            if (trunk_budget < min_trunk || cache_budget < min_cache)
                throw Error(ErrorKind::Usage, "--preset auto: MemAvailable is " + format_gb(mem_available) + "; after keeping " +
                                                  format_gb(reserve) + " for the rest of the engine there is " +
                                                  format_gb(std::max<int64_t>(usable, 0)) +
                                                  " for weights, too little to run this model (its trunk's read ring needs " +
                                                  format_gb(min_trunk) + " and the expert cache " + format_gb(min_cache) +
                                                  "); free memory or give explicit --trunk-gb/--cache-gb");
        } else {
            const PresetBudget* p = nullptr;
            for (const auto& q : kPresets)
                if (q.name == options.preset) p = &q;
            if (!p)
                throw Error(ErrorKind::Usage, "unknown memory preset '" + options.preset + "' (known: " + preset_names() + ")");
            trunk_budget = gb_to_bytes(p->trunk_gb);
            cache_budget = gb_to_bytes(p->cache_gb);
            prefill_mb = p->prefill_mb;
        }
    }
    if (options.trunk_gb >= 0) trunk_budget = gb_to_bytes(options.trunk_gb);
    if (options.cache_gb >= 0) cache_budget = gb_to_bytes(options.cache_gb);
    if (options.prefill_mb >= 0) prefill_mb = options.prefill_mb;
    if (options.preset.empty() && plan.streaming) plan.source = "explicit";
    plan.trunk_budget = trunk_budget;
    plan.cache_budget = cache_budget;

    // 2. What that buys on this model. A rank other than 0 of expert parallelism computes
    // routed experts only: no trunk layer is pinned or streamed there.
    if (options.expert_rank > 0) {
        plan.trunk_budget = 0;
        plan.trunk.pinned.assign(model.layer_alloc_bytes.size(), 0);
    } else {
        plan.trunk = plan_trunk(model.layer_alloc_bytes, trunk_budget);
    }
    plan.cache_slot_bytes = model.expert_slot_bytes;
    if (model.routed_experts > 0) {
        int64_t slots = std::min<int64_t>(model.routed_experts, cache_budget / model.expert_slot_bytes);
        if (slots < min_cache_slots)
            throw Error(ErrorKind::Usage, "expert cache budget " + format_gb(cache_budget) + " holds " + std::to_string(slots) +
                                              " experts of " + format_gb(model.expert_slot_bytes) + "; a layer needs " +
                                              std::to_string(min_cache_slots) + " at once: raise --cache-gb to at least " +
                                              format_gb(int64_t(min_cache_slots) * model.expert_slot_bytes));
        plan.cache_slots = int(slots);
    }
    size_prefill_pass(model, prefill_mb, options.pass_tokens, plan);
    plan.prompt_cache_budget = prompt_cache_budget(options);
    plan.prompt_cache_dir = options.prompt_cache_dir;
    plan.prompt_cache_disk_budget = options.prompt_cache_dir.empty() ? 0 : prompt_cache_disk_budget(options);
    // A pass budget that was asked for counts in the plan (what the cache lends is in the cache's
    // figure already); the default (256 MB) is part of what the engine keeps outside it, as auto's
    // reserve assumes.
    plan.need_bytes = plan.trunk.total_bytes() + int64_t(plan.cache_slots) * plan.cache_slot_bytes + plan.resident_bytes + plan.vision_bytes +
                      (prefill_mb >= 0 ? std::min(plan.prefill_bytes, plan.pass_own_bytes) : 0);

    // 3. Refuse before allocating anything.
    int64_t limit = int64_t(double(mem_available) * kRefuseAboveFraction);
    if (plan.need_bytes + plan.prompt_cache_budget > limit) {
        std::ostringstream m;
        m << "memory plan refused: " << plan.source << " needs " << format_gb(plan.need_bytes + plan.prompt_cache_budget)
          << " (trunk "
          << format_gb(plan.trunk.total_bytes()) << ", expert cache " << format_gb(int64_t(plan.cache_slots) * plan.cache_slot_bytes)
          << ", lm_head/norms " << format_gb(plan.resident_bytes) << ", vision tower " << format_gb(plan.vision_bytes)
          << ", prompt cache "
          << format_gb(plan.prompt_cache_budget) << ", prefill pass " << format_gb(std::min(plan.prefill_bytes, plan.pass_own_bytes)) << ") but MemAvailable is "
          << format_gb(mem_available) << " and a plan may use at most 95% of it (" << format_gb(limit)
          << "); lower --trunk-gb, --cache-gb, --prefill-mb and/or --prompt-cache-gb, pick a smaller --preset (laptop, desktop, ...) or use --preset auto";
        throw Error(ErrorKind::Memory, m.str());
    }
    return plan;
}

int64_t read_mem_available() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    int64_t value = 0;
    std::string unit;
    while (in >> key >> value) {
        std::getline(in, unit);
        if (key == "MemAvailable:") return value * 1024;
    }
    throw Error(ErrorKind::Memory, "cannot read MemAvailable from /proc/meminfo");
}

}  // namespace k3::io
