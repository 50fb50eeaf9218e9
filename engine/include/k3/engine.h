// The public boundary of the engine: what the server and the CLI see. No tensors, dtypes or
// kernels cross it. An Engine holds the loaded model (trunk, expert cache, kernels, compute
// threads); a Session holds one sequence's state (token history, KDA recurrent state and conv
// history, MLA KV rows) and its logits. Neither is thread-safe: exactly one thread (the daemon's
// engine worker, or the CLI's main thread) uses an Engine and its Sessions.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "k3/image.h"
#include "k3/image_prompt.h"
#include "k3/options.h"
#include "k3/status.h"
#include "k3/weights_load.h"

namespace k3 {

// Facts about the loaded model, for logs, /props and /v1/models.
struct ModelInfo {
    std::string name;              // directory name of the checkpoint
    std::string shape;             // one-line shape summary
    std::string kernels;           // selected kernel set
    std::string memory_plan;       // human-readable plan
    int64_t memory_plan_bytes = 0; // what the plan allocates for weights (the memory budget in use)
    int n_vocab = 0;
    int n_layers = 0;              // decoder layers: Engine::progress() moves by this much per step
    int n_ctx_max = 0;             // largest context a session may ask for
    int bos_token_id = -1, eos_token_id = -1;
    int64_t kv_bytes_per_position = 0;
    std::string fingerprint;       // identifies model + weights; state is only reused under the same one
    bool vision = false;           // the vision tower is loaded: encode_image() works
    int n_embd = 0;                // the language model's hidden size (the width of an image row)
};

// Cumulative counters (monotonic since load), for the run report and /metrics.
struct EngineStats {
    uint64_t tokens_evaluated = 0;
    uint64_t trunk_bytes_read = 0;
    uint64_t expert_bytes_read = 0;
    uint64_t expert_requests = 0;
    uint64_t expert_hits = 0;          // served from the cache without a read
    uint64_t expert_evictions = 0;
    uint64_t expert_read_failures = 0;
    double io_seconds = 0;             // time spent waiting for reads
    double compute_seconds = 0;
    int pinned_layers = 0;
    int64_t ring_bytes = 0;        // the trunk read ring (0: no layer streams)
    uint64_t expert_prefetch_reads = 0;  // experts read ahead by the next-layer lookahead
    uint64_t expert_prefetch_hits = 0;   // requests that found such a read-ahead (done or in flight)
    uint64_t lookahead_predicted = 0;    // experts the lookahead predicted (read or not)
    uint64_t lookahead_confirmed = 0;    // of them, chosen by the layer
    double expert_wait_seconds = 0;      // parts of io_seconds: waiting for experts,
    double trunk_wait_seconds = 0;       // and for trunk layers
    // Passes (docs/performance.md, "Prefill passes"): every step is one forward pass over the
    // weights, a prompt's passes and decode steps alike.
    uint64_t passes = 0;                 // forward passes completed
    int pass_tokens_max = 0;             // the most tokens a pass takes (the memory plan's prefill pass)
    uint64_t trunk_layer_reads = 0;      // trunk layer runs read from disk (a streamed layer once a pass)
    uint64_t expert_read_waits = 0;      // expert acquisitions that issued their own reads and waited
                                         // (nothing read ahead had them; the pipeline keeps it to a
                                         // layer's first batch)
    uint64_t pass_lent_bytes = 0;        // bytes lent to passes: the expert cache's slots, the lm_head,
                                         // pinned trunk layers (each pass's, summed)
    uint64_t pass_unpinned_layers = 0;   // pinned trunk layers lent to passes (each pass's, summed)
    uint64_t lm_head_reads = 0;          // the lm_head read again after a pass borrowed it
    int resident_pinned_layers = 0;      // pinned layers in memory now (one lent to a pass is read
                                         // again at its first use after it)
    // expert parallelism, rank 0's side (docs/operations.md "Several machines"; 0 in one process)
    uint64_t expert_exchanges = 0;             // a layer's rows sent to the other ranks and answered
    uint64_t expert_exchange_bytes = 0;        // inputs sent and outputs received
    double expert_exchange_seconds = 0;        // from sending a layer's rows to its last output back
    double expert_exchange_wait_seconds = 0;   // of which waited for, this rank's own experts done
    // the shared prompt cache
    uint64_t prompt_cache_lookups = 0;
    uint64_t prompt_cache_hits = 0;         // prompts resumed from it
    uint64_t prompt_cache_tokens_saved = 0; // prompt tokens it spared
    uint64_t prompt_cache_evictions = 0;
    int64_t prompt_cache_bytes = 0;         // held now
    int64_t prompt_cache_budget = 0;
    int prompt_cache_snapshots = 0;         // resumable positions held now
    // its disk tier (--prompt-cache-dir)
    bool prompt_cache_disk = false;              // there is one
    uint64_t prompt_cache_disk_hits = 0;         // states loaded back from disk
    uint64_t prompt_cache_disk_writes = 0;
    uint64_t prompt_cache_disk_refused = 0;      // files refused (checksum, fingerprint, ...) and removed
    uint64_t prompt_cache_disk_write_failures = 0;
    uint64_t prompt_cache_disk_evictions = 0;
    int64_t prompt_cache_disk_bytes = 0;         // on disk now
    int64_t prompt_cache_disk_budget = 0;
    int prompt_cache_disk_files = 0;
};

// One cached prompt state (Engine::prompt_cache_entries), most recently used first.
struct PromptCacheEntry {
    uint64_t partition = 0;  // the prompt cache partition it serves (Session::set_cache_partition)
    int tokens = 0;          // prefix length it resumes at
    bool has_logits = false; // resuming there needs no evaluation at all
    int64_t bytes = 0;       // rows and snapshot along its path
};

class Session {
public:
    virtual ~Session() = default;

    // Make the session's sequence equal `tokens` and compute the logits of its last position.
    // Reuses the longest verified prefix already evaluated (KV rows and a KDA snapshot) and
    // evaluates only the rest; *reused receives how many tokens were not recomputed.
    // Checks `cancel` between layers; on cancel or error the session stays usable.
    virtual Status sync(std::span<const int32_t> tokens, const CancelFlag& cancel, int* reused = nullptr) = 0;
    // The images of the prompts given next (sync, begin_prompt, prefill_all_logits), until set
    // again (docs/model.md "Images in the prompt"). Their positions hold image_row_ids
    // (k3/image_prompt.h), embedded from the image's rows; a prompt with such ids that no image
    // covers is refused. An image's tower runs in begin_prompt, only when the prompt evaluates
    // its positions (not when the prompt cache resumes past it).
    virtual void set_prompt_images(std::vector<PromptImage> images) = 0;
    // Append one token (decode step) and compute its logits.
    virtual Status append(int32_t token, const CancelFlag& cancel) = 0;
    // Logits of the last evaluated position, [n_vocab].
    virtual std::span<const float> logits() const = 0;
    virtual std::span<const int32_t> tokens() const = 0;
    virtual int n_ctx() const = 0;
    // Chunked prompt evaluation, for a caller that interleaves several sessions in one
    // Engine::step (the daemon's batch). begin_prompt validates `prompt` and puts the session at
    // the longest reusable prefix (the live state or the engine's prompt cache; *reused = its
    // length). Then, until prompt_pending() is 0: evaluate next_prompt_chunk(max) in a step and
    // call prompt_chunk_done(), which keeps snapshots in the prompt cache where they pay off.
    // sync() is exactly this loop with the session alone.
    virtual Status begin_prompt(std::span<const int32_t> prompt, int* reused) = 0;
    virtual std::span<const int32_t> next_prompt_chunk(size_t max_tokens) const = 0;
    virtual void prompt_chunk_done() = 0;
    virtual size_t prompt_pending() const = 0;
    // After a step that asked for all_logits: the logits after the step's i-th token, [n_vocab].
    virtual std::span<const float> step_logits(size_t i) const = 0;
    // Drops the last tokens, keeping the first n (not fewer than the session had before its
    // last all_logits step): the state becomes exactly that of the first n tokens and logits()
    // their last row. Speculative decoding keeps the accepted drafts this way.
    virtual Status truncate(size_t n) = 0;
    // Keeps the current state (e.g. prompt + generated tokens at the end of a request) in the
    // engine's prompt cache, so a later request that continues it resumes here.
    virtual void remember() = 0;
    // Which partition of the engine's prompt cache the session reads and fills from now on
    // (0 until set). States made in one partition never serve another: the daemon gives each
    // API key its own (docs/operations.md "The prompt cache and API keys"), so one key's
    // cached_tokens say nothing of another key's prompts. A different partition also drops the
    // live state, made in the old one; the same partition again keeps it.
    virtual void set_cache_partition(uint64_t partition) = 0;
    // Evaluate `tokens` from an empty state and return the logits of every position,
    // [tokens.size()][n_vocab] row-major (for --dump-logits and golden tests).
    virtual Status prefill_all_logits(std::span<const int32_t> tokens, std::vector<float>& out) = 0;
};

class Engine {
public:
    virtual ~Engine() = default;

    // Loads and validates the checkpoint; throws k3::Error (k3/error.h) naming the file and
    // what is wrong. `progress` (may be empty) receives human-readable loading status lines.
    static std::unique_ptr<Engine> load(const EngineOptions& options,
                                        const std::function<void(const std::string&)>& progress = {});

    virtual const ModelInfo& info() const = 0;
    virtual EngineStats stats() const = 0;
    virtual std::unique_ptr<Session> new_session(int n_ctx) = 0;

    // One engine step over several sessions: each item's tokens are appended to its session
    // and evaluated in one pass over the weights (at most max_step_tokens() in all, each session
    // once). Every session gets the bits it would get alone. On failure no session advances
    // (each is rolled back to a consistent prefix, possibly empty).
    struct StepItem {
        Session* session = nullptr;
        std::span<const int32_t> tokens;
        bool all_logits = false;  // keep every token's logits (Session::step_logits) and allow truncate()
        // Checked between layers when the step holds this item alone (a lone prompt chunk can
        // be cancelled mid-pass; a shared step finishes for the others' sake).
        const CancelFlag* cancel = nullptr;
    };
    virtual Status step(std::span<const StepItem> items) = 0;
    // step() whose pass calls `between_layers(il)` before each layer il (and while a test hold
    // keeps it waiting): from inside it the caller may run step() for sessions that are not in
    // this one (other streams' decode steps while a long prompt's pass is under way,
    // docs/performance.md "Other streams during a prefill"). Such a step leaves this pass's
    // state alone; it takes no hook of its own. The default, for engines without layers, is
    // step() with the hook never called.
    using BetweenLayers = std::function<void(int il)>;
    virtual Status step_between_layers(std::span<const StepItem> items, const BetweenLayers& between_layers) {
        (void)between_layers;
        return step(items);
    }
    virtual int max_step_tokens() const = 0;
    // The most tokens of a step_between_layers() pass: such a pass keeps the lm_head (its side
    // steps' output products need it), so where a full pass would borrow it the pass is shorter,
    // and the memory plan holds (0: not one token; the caller shares a step instead).
    virtual int max_pass_tokens_keeping_lm_head() const { return max_step_tokens(); }
    virtual std::vector<PromptCacheEntry> prompt_cache_entries() const = 0;
    // A counter that moves while the engine computes (layers evaluated since load); safe to read
    // from any thread. The daemon's liveness check: a busy worker whose engine stops moving is
    // stuck. 0 for engines that do not count.
    virtual uint64_t progress() const { return 0; }
    // How far the weights are read (WeightsLoad); safe to call from any thread.
    virtual WeightsLoad weights_load() const { return {}; }
    // The rows [N][n_embd] that one prepared image (k3/image.h) puts into the language model's
    // input: the vision tower, the 2x2 merge and the projector on the engine's threads
    // (docs/model.md "Image input"). Throws k3::Error(Usage) when info().vision is false.
    virtual std::vector<float> encode_image(const PreparedImage& image);
};

}  // namespace k3
