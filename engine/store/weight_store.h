// Where the forward pass gets its trunk and expert bytes. The embedding, lm_head and model-level
// norms are always resident (the engine loads them itself); a WeightStore serves the layer runs
// and the routed experts, either all resident (make_resident_store) or within a memory budget
// by streaming from disk (io/streaming_store: pinned layers + read ring, expert cache).
// Bytes are laid out exactly as on disk, so a tensor is run + Checkpoint::offset_in_layer().
// Used only by the engine's owning thread.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "store/expert_share.h"
#include "store/memory_plan.h"
#include "weights/checkpoint.h"
#include "k3/options.h"
#include "k3/status.h"
#include "k3/weights_load.h"

namespace k3 {

struct WeightStoreStats {
    uint64_t trunk_bytes_read = 0;
    uint64_t expert_bytes_read = 0;
    uint64_t expert_requests = 0;
    uint64_t expert_hits = 0;
    uint64_t expert_evictions = 0;
    uint64_t expert_read_failures = 0;
    double io_wait_seconds = 0;
    int pinned_layers = 0;
    int64_t ring_bytes = 0;        // the trunk read ring (0: no layer streams)
    // Added by the streaming store (io/): where the reads and the waiting went.
    uint64_t expert_prefetch_reads = 0;   // experts read ahead by prefetch_experts
    uint64_t expert_prefetch_hits = 0;    // requests served by such a read-ahead
    uint64_t trunk_layer_reads = 0;       // layer runs read (pinned first touch + ring)
    double trunk_wait_seconds = 0;        // part of io_wait_seconds spent waiting for trunk layers
    double expert_wait_seconds = 0;       // part of io_wait_seconds spent waiting for experts
    uint64_t pass_lent_bytes = 0;         // bytes lent to prefill passes (cache slots, lm_head, pinned layers; each pass's, summed)
    uint64_t pass_unpinned_layers = 0;    // pinned layers lent to prefill passes (each pass's, summed)
    int resident_pinned_layers = 0;       // pinned layers in memory now (a lent one is read again at its first use)
    uint64_t expert_demand_reads = 0;     // acquisitions that had to issue reads (nothing read ahead had them)
};

class WeightStore {
public:
    virtual ~WeightStore() = default;

    // The bytes of layer il's trunk run, blocking until they are in memory; valid until
    // release_layer(il). May start read-ahead of the following layers.
    virtual Status acquire_layer(int il, const uint8_t** run) = 0;
    virtual void release_layer(int il) = 0;

    // Makes the listed experts of layer il resident (reads issued together, in offset order)
    // and sets out[j] to expert experts[j]'s run (six tensors back to back, as on disk).
    // Valid until release_experts(il). A failed or short read is an IoError naming the file
    // and offset; no pointer is handed out for it.
    virtual Status acquire_experts(int il, std::span<const int32_t> experts, const uint8_t** out) = 0;
    virtual void release_experts(int il) = 0;
    // Largest number of distinct experts one acquire_experts call may ask for.
    virtual int max_experts_per_acquire() const = 0;

    // Hint: these experts of layer il are likely to be asked for soon.
    virtual void prefetch_experts(int /*il*/, std::span<const int32_t> /*experts*/) {}

    // Next-layer lookahead (model/moe.cpp): whether prefetching the experts the next layer's
    // router predicts can pay here. Off: never (everything resident, no room in the cache,
    // --no-lookahead). Streamed: the trunk streams, so steps wait on the disk anyway and the
    // reads go ahead. Resident: the trunk is in memory and a wrong prediction's read delays the
    // right ones, so reads go ahead only while predictions prove precise.
    enum class Lookahead { Off, Streamed, Resident };
    virtual Lookahead lookahead() const { return Lookahead::Off; }
    // Layer il's run if it is already in memory (pinned, or read by the trunk ring's read-ahead);
    // never blocks, never reads; nullptr otherwise. Valid while layer il-1 is held.
    virtual const uint8_t* peek_layer(int /*il*/) { return nullptr; }

    // A prefill pass that takes `bytes` (weights/chunk_size.h pass_bytes) starts, and ends: what
    // the memory plan lends it (io::MemoryPlan::loan_for; docs/performance.md, "Prefill passes").
    // The streaming store's expert cache gives its lent slots' pages back and takes them back
    // empty at the end; a lent pinned layer gives its pages back, is read into them when the pass
    // acquires it and gives them back again at its release, and is read again at its first use
    // after the pass. The lm_head is the model's: the loan says whether to lend it (never when
    // `lm_head_lendable` is false). The resident store lends nothing.
    virtual io::PassLoan begin_pass(int64_t /*bytes*/, bool /*lm_head_lendable*/) { return {}; }
    // The most tokens of a pass that may not borrow the lm_head (MemoryPlan::
    // chunk_tokens_keeping_lm_head); -1 where nothing is lent, so the pass's own size is the limit.
    virtual int pass_tokens_keeping_lm_head() const { return -1; }
    virtual void end_pass() {}
    virtual WeightStoreStats stats() const = 0;
    // How far the load has come (k3/weights_load.h); any thread may ask.
    virtual WeightsLoad weights_load() const { return {}; }
    // Waits until a background load has read everything: its first failure, or Ok.
    virtual Status finish_load() { return Status::Ok(); }
};

// Everything read into memory once at load. With `background`, the store is returned once the
// trunk runs are read and the routed experts go on loading on the store's reader threads; a step
// that needs one not read yet reads it first (MemoryOptions::background_load). Under expert
// parallelism only `share`'s experts are read, and no trunk on a rank other than 0. While the file
// `hold_file` names exists, the background reads stop after the trunk (the test hook
// MemoryOptions::hold_background_load).
std::unique_ptr<WeightStore> make_resident_store(const Checkpoint& ckpt, bool background = false,
                                                 ExpertShare share = {}, const std::string& hold_file = {});

// Within a memory budget (io/memory_plan.h: make_memory_plan(footprint_of(ckpt), options,
// read_mem_available())): pinned layers + read ring for the trunk, a budgeted expert cache,
// O_DIRECT reads with several in flight. Throws k3::Error (Checkpoint for a packed trunk that
// does not match, Memory when allocation fails).
std::unique_ptr<WeightStore> make_streaming_store(const Checkpoint& ckpt, const io::MemoryPlan& plan);

// The store Engine::load uses: make_resident_store when `memory` asks for no budget (preset
// empty, no trunk/cache GB), otherwise the streaming store for that budget. *plan receives a
// one-line description of the memory plan (ModelInfo::memory_plan), *planned_bytes what it
// allocates for weights (ModelInfo::memory_plan_bytes).
std::unique_ptr<WeightStore> open_weight_store(const Checkpoint& ckpt, const MemoryOptions& memory,
                                               io::MemoryPlan* plan);

}  // namespace k3
