// The memory plan: how many bytes the weights may take, split into the trunk budget (pinned
// layers + a read ring) and the expert cache budget (whole packed experts), from a preset, from
// explicit --trunk-gb/--cache-gb, or derived from MemAvailable (`auto`). Made before anything is
// allocated, and refused (k3::Error kind Memory, exit 1) when it would take more than 95% of
// MemAvailable. GB here are 10^9 bytes, as in the C engine's presets.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/expert_share.h"
#include "weights/checkpoint.h"
#include "weights/chunk_size.h"
#include "k3/options.h"

namespace k3::io {

struct PresetBudget {
    std::string_view name;
    double trunk_gb;
    double cache_gb;
    double prefill_mb;   // activations of one prefill chunk
};

// laptop 3/1, desktop 16/10, workstation 60/30, server 110/13, max 110/109 (budgets sized for
// the real Kimi K3; on a smaller model each is capped at what the model needs); prefill chunk
// activations 512 MB, 2 GB, 4 GB, 4 GB, 8 GB (auto and no preset: the default chunk of at most
// 256 tokens and 256 MB, unless --prefill-mb says otherwise).
std::span<const PresetBudget> memory_presets();

inline constexpr double kGB = 1e9;
inline constexpr double kRefuseAboveFraction = 0.95;

// Which layers stay in memory and how big the read ring is, within a trunk budget.
struct TrunkPlan {
    std::vector<char> pinned;      // [n_layers]
    int n_pinned = 0;
    int64_t pinned_bytes = 0;      // allocation for the pinned layers
    int64_t ring_bytes = 0;        // the read ring (ring_schedule.h); 0 when every layer is pinned
    // What the ring does over a walk (simulate_ring_walk): layers held ahead of the one being
    // computed, and the streamed layers whose read cannot start before the layer before them
    // is released (their read does not overlap compute), and the streamed layers that never
    // give their bytes away, so stay in the ring and are read once, not every token.
    int ring_min_ahead = 0, ring_max_ahead = 0, ring_waiting_layers = 0, ring_kept_layers = 0, streamed_layers = 0;
    int64_t ring_kept_bytes = 0;   // allocation of the kept layers
    int64_t total_bytes() const { return pinned_bytes + ring_bytes; }
    std::string describe_ring() const;  // "ring 3.19 GB (reads up to 2 layers ahead; ...)"
};

// Chooses which layers to pin within `budget`; the rest of the budget is the read ring.
// Pinned bytes save a read on every token, ring bytes beyond the largest streamed layer buy
// overlap (the next layer is read while this one computes), so: the most pinned bytes that
// still leave a ring holding every two consecutive streamed layers of the walk; pinning the
// largest layers first also shrinks that ring, so every "pin the k largest" prefix is tried, then
// smaller layers are added greedily. When no pinned set leaves such a ring, nothing is pinned and
// the whole budget is the ring (as many layers ahead as fit; where only one fits, reading waits
// for compute): a pinned layer would save its read but take read-ahead from every layer around
// it. `alloc_bytes[il]` is what layer il takes in memory. Throws k3::Error(Usage) when the
// budget does not hold the largest layer, saying the smallest budget that works.
TrunkPlan plan_trunk(std::span<const int64_t> alloc_bytes, int64_t budget);

// The smallest trunk budget plan_trunk accepts: a ring that holds the largest layer.
int64_t smallest_trunk_budget(std::span<const int64_t> alloc_bytes);

// What the plan needs to know about a model.
struct ModelFootprint {
    std::vector<int64_t> layer_alloc_bytes;  // per layer: memory for its trunk run (aligned window)
    int64_t expert_slot_bytes = 0;           // one cache slot (aligned window of one expert)
    int64_t routed_experts = 0;              // experts in the whole pool
    int experts_per_token = 0;               // top-k
    PassCost pass;                           // what a prefill pass takes (weights/chunk_size.h)
    int default_chunk_tokens = 0;            // the pass without a prefill budget (chunk_tokens_for)
    int64_t resident_bytes = 0;              // lm_head, model norms (always resident; the embedding is read by row)
    int64_t lm_head_bytes = 0;               // of it, the lm_head (lent to a streamed plan's prefill passes)
    int64_t vision_bytes = 0;                // the vision tower and projector (resident while the checkpoint
                                             // has them and --no-vision is not given)
};
ModelFootprint footprint_of(const Checkpoint& ckpt);
// What one rank of expert parallelism holds: its share of the routed experts (the trunk stays
// in the footprint; make_memory_plan plans none for a rank other than 0).
ModelFootprint share_footprint(ModelFootprint model, ExpertShare share, int experts_per_layer);

// What one prefill pass borrows beyond its own budget (docs/performance.md, "Prefill passes"),
// in the order it borrows, cheapest to give back first: the expert cache's slots beyond the
// pipeline's two batches (their experts are read again on a later miss), the lm_head (read again
// before the pass's output product: once a pass, since every pass of a prompt
// leaves its last token's logits for the prompt cache's snapshot), pinned trunk layers (each read once during the
// pass into its own pages and given back after its use, read again at its first use after the
// pass), largest first.
struct PassLoan {
    int cache_slots = 0;
    bool lm_head = false;
    std::vector<int> layers;  // pinned layers unpinned for the pass
    int64_t bytes = 0;        // what the loan frees (a lent layer keeps room for the one in use)
};

struct MemoryPlan {
    bool streaming = false;          // false: everything resident (no budget asked for)
    std::string source;              // "resident", "preset laptop", "auto", "explicit"
    int64_t trunk_budget = 0, cache_budget = 0;   // as asked (after preset/auto), bytes
    TrunkPlan trunk;
    int cache_slots = 0;
    int64_t cache_slot_bytes = 0;
    int64_t resident_bytes = 0;
    int64_t vision_bytes = 0;        // the vision tower and projector, resident (0: text only)
    int64_t need_bytes = 0;          // everything the plan allocates for weights
    int64_t mem_available = 0;
    std::string trunk_dir;           // packed trunk to read layers from ("" = the shards)
    int chunk_tokens = 0;            // tokens per prefill pass (docs/performance.md "Prefill passes")
    bool lookahead = true;           // next-layer expert prefetch (MemoryOptions::lookahead)
    int64_t prefill_bytes = 0;       // what a pass of chunk_tokens takes (weights/chunk_size.h pass_bytes)
    int64_t pass_own_bytes = 0;      // of it, the pass's own budget (--prefill-mb, the preset's or the default)
    int pass_lent_slots = 0;         // expert cache slots lent to a pass for the rest (given back after it)
    int64_t pass_lm_head_bytes = 0;  // the lm_head, when a pass may borrow it (streamed plans)
    std::vector<int> pass_layers;    // pinned layers a pass may unpin, in the order it does (largest first)
    int64_t pass_layer_room = 0;     // of the unpinned layers' bytes, the room the one in use keeps (the largest)
    std::vector<int64_t> trunk_layer_sizes;  // [n_layers] each layer's allocation (streamed plans)
    int64_t trunk_layer_bytes(int il) const { return trunk_layer_sizes[size_t(il)]; }
    int max_pass_tokens = 0;         // MemoryOptions::pass_tokens (0: as many as memory allows)
    // A pass that may not borrow the lm_head (one with decode steps between its layers: their
    // output products need it): as many tokens as its own budget and the rest of the loan hold,
    // at most chunk_tokens; 0 when that is not one token.
    int chunk_tokens_keeping_lm_head = 0;
    int64_t prompt_cache_budget = 0; // the shared prompt cache (sequence states); not in need_bytes,
                                     // but the 95% refusal counts it
    std::string prompt_cache_dir;    // its disk tier ("" = none; disk, not in any RAM figure)
    int64_t prompt_cache_disk_budget = 0;

    std::string describe() const;    // one line for logs and the run report
    // What a pass of `bytes` (PassCost::bytes) borrows: the least, in PassLoan's order, that
    // covers what its own budget does not (everything lendable when that is not enough). Without
    // `lm_head_lendable` (a pass whose output rows do not fit one tile: all_logits) the lm_head is
    // skipped. The one rule the store, the model and `plan` use.
    PassLoan loan_for(int64_t bytes, bool lm_head_lendable = true) const;
    // Everything a pass may borrow: cache slots, the lm_head, the unpinned layers less their room.
    int64_t lendable_bytes() const;
    std::string describe_pass() const;  // "prefill pass 9,600 tokens (5.12 GB, 4.80 GB of it lent by the expert cache)"
};

// RAM for the shared prompt cache: --prompt-cache-gb, else the preset's (laptop 0.5, desktop 2,
// workstation/server/max 8, auto 0.5 GB, taken from auto's fixed reserve), else 1 GB.
int64_t prompt_cache_budget(const MemoryOptions& options);
// Disk for its tier (--prompt-cache-dir): --prompt-cache-dir-gb, else 8 times the RAM budget
// (laptop 4, desktop 16, workstation/server/max 64, otherwise 8 GB).
int64_t prompt_cache_disk_budget(const MemoryOptions& options);

// True when the options ask for a budget (a preset, an explicit trunk/cache size, or a packed
// trunk to stream from).
bool wants_budget(const MemoryOptions& options);

// Makes the plan. Throws k3::Error(Usage) for an unknown preset or a budget too small to run
// at all, and k3::Error(Memory) when the plan needs more than 95% of `mem_available`.
MemoryPlan make_memory_plan(const ModelFootprint& model, const MemoryOptions& options, int64_t mem_available);

// MemAvailable from /proc/meminfo, in bytes. Throws k3::Error(Memory) when it cannot be read.
int64_t read_mem_available();

std::string format_gb(int64_t bytes);  // "1.23 GB"

}  // namespace k3::io
