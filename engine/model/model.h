// The Kimi K3 model on CPU: what is fixed after load (config, kernels and threads, weight
// layouts and the resident model-level tensors, scratch) and forward(), which evaluates a chunk
// of tokens for one sequence. blocks.h has the per-block functions forward() calls.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/activations.h"
#include "weights/checkpoint.h"
#include "model/compute.h"
#include "model/remote_experts.h"
#include "k3/status.h"
#include "model/stage_clock.h"
#include "model/state.h"
#include "model/trace.h"
#include "util/aligned_bytes.h"
#include "store/weight_store.h"
#include "weights/weights.h"
#include "io/file.h"

namespace k3 {

struct Model {
    // chunk_tokens: the largest forward chunk (the memory plan's prefill chunk; <= 0: the
    // default, chunk_tokens_for(cfg)).
    Model(const Checkpoint& ckpt, const Kernels& k, int n_threads, WeightStore& store, int chunk_tokens = 0);

    const Checkpoint& ckpt;
    const ModelConfig& cfg;
    Compute compute;
    WeightStore& store;
    std::vector<LayerLayout> layouts;     // [n_layer]
    std::vector<LayerVectors> vectors;    // [n_layer] fp32 small vectors, filled on first use
    std::vector<KdaWeights> replay_weights;  // [n_layer] views kept by a captured step for kda_replay

    // Model-level tensors, always resident.
    // The embedding [V][E] bf16 stays on disk: a token needs one row, read when it is embedded
    // (through the page cache). Holding all of it took 2.35 GB on Kimi K3 (0.13 GB on k3-mini),
    // a fixed cost that mattered most at the smallest budgets.
    io::File embed_file;
    int64_t embed_offset = 0;
    std::vector<uint16_t> embed_row;      // [E] the row being widened
    // [V][E] bf16. Lent to a prefill pass when the memory plan says so (MemoryPlan::loan_for):
    // its pages go back at the pass's start and it is read again from the checkpoint before the
    // next output product (docs/performance.md, "Prefill passes").
    io::AlignedBuffer lm_head;
    io::File lm_head_file;
    int64_t lm_head_offset = 0;
    bool lm_head_lent = false;
    uint64_t lm_head_reads = 0;           // reads of it after a pass borrowed it
    std::vector<float> final_norm;        // [E]
    std::vector<float> fold_out;          // [E]  output_attn_res_norm ⊙ output_attn_res_proj

    PassCost pass_cost;                   // what a prefill pass takes (weights/chunk_size.h)
    Activations act;
    // Decode steps between the layers of a pass (forward_batch's between_layers): such a step
    // runs in these, swapped with `act` for its length, so the pass's rows (pref, blocks) stay
    // as they are. Made at the first such step; its arrays take memory only where written.
    std::unique_ptr<Activations> side_act;
    bool in_pass = false;                 // a forward_batch is under way (a nested one is a side step)
    uint64_t side_steps = 0;              // steps run between the layers of a pass since load

    // When set, forward() hands it every named intermediate (trace.h); tests attach one.
    Trace* trace = nullptr;
    // Test hook (docs/development.md, "Tests wait on states"): while the file EngineOptions::
    // hold_pass names exists, a pass of more than one token waits before its middle layer (until then
    // cancelled), so a test reads a pass's layer on /v1/status without racing it.
    std::string test_hold_pass;

    // Expert parallelism (remote_experts.h): this process computes the routed experts
    // [experts_begin, experts_end) of every layer; `remote`, when set, the others.
    RemoteExperts* remote = nullptr;
    int experts_begin = 0;
    int experts_end = 0;  // set to cfg.num_experts by the constructor

    // Layers evaluated since load, bumped after each one (any thread may read it): the daemon's
    // liveness check sees a long prefill make progress, and a stuck one not.
    std::atomic<uint64_t> layers_evaluated{0};

    // Next-layer lookahead (moe.cpp): experts predicted, and how many of them the layer then
    // chose; reads go ahead on a resident trunk only while the share stays high.
    uint64_t lookahead_predicted = 0;
    uint64_t lookahead_confirmed = 0;

    // Wall seconds of the forward pass by stage since load (stage_clock.h; the run report's
    // forward_stage_seconds).
    StageSums stage_seconds{};
};

// One sequence's part of a forward chunk: its tokens (evaluated at positions st->n_past...) and
// where its logits go: the last token's [V], every token's [n][V] when all_logits, or nowhere
// when null. `rows`, when not empty, has one entry per token: an image row [E] that is the
// token's input instead of its embedding (its id is then an image row id >= V,
// k3/image_prompt.h), or null.
struct ForwardItem {
    SequenceState* st;
    std::span<const int32_t> tokens;
    float* logits = nullptr;
    bool all_logits = false;
    std::span<const float* const> rows = {};
};

// Called between the layers of a pass, before layer il (0..n_layer-1), and while a test hold
// keeps the pass waiting: the caller may run forward_batch for other sequences from inside it
// (docs/performance.md, "Other streams during a prefill"). Those side steps use Model::side_act,
// borrow nothing, do not count in layers_evaluated (the pass's own progress) and take no hook.
using BetweenLayers = std::function<void(int il)>;

// Evaluates the items' tokens together in one pass over the weights (at most m.act.max_tokens
// in all, the plan's chunk; the states distinct), advancing each KDA state and writing each
// sequence's MLA latent rows; on success every st->n_past grows by its tokens. Every row is
// computed exactly as if its sequence ran alone (the kernels are row-independent), so a batch
// gives each sequence the bits of a solo run. Checks `cancel` between layers. On failure
// (Cancelled, IoError) the states are partly advanced and must be restored by the caller
// (Session rolls back).
// With `between_layers` (not null) the pass does not borrow the lm_head, which a side step needs.
Status forward_batch(Model& m, std::span<const ForwardItem> items, const CancelFlag* cancel,
                     const BetweenLayers* between_layers = nullptr);

// forward_batch() of one sequence.
inline Status forward(Model& m, SequenceState& st, std::span<const int32_t> tokens, float* logits, bool all_logits,
                      const CancelFlag* cancel) {
    const ForwardItem one{&st, tokens, logits, all_logits};
    return forward_batch(m, std::span<const ForwardItem>(&one, 1), cancel);
}

}  // namespace k3
