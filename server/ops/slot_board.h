// SlotBoard: what GET /slots shows, published by the engine worker after every step (it is the
// only thread that may ask the engine) and read by HTTP threads. One mutex; the worker replaces
// the whole picture, readers copy it.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "k3/engine.h"

namespace k3::server {

struct SlotView {
    int slot = 0;
    uint64_t job_id = 0;           // 0: the slot is idle
    std::string phase;             // "idle", "prefill", "decode"
    int prompt_tokens = 0;
    int cached_tokens = 0;         // prompt tokens resumed, not evaluated
    int prompt_evaluated = 0;      // prompt tokens in the state so far (cached included)
    int generated_tokens = 0;
    int max_tokens = 0;
    double seconds = 0;            // since the job was admitted to the slot
};

struct SlotBoardView {
    std::vector<SlotView> slots;
    int queued = 0;
    uint64_t steps = 0;            // engine steps so far
    uint64_t batched_tokens = 0;   // decode tokens evaluated in steps of more than one sequence
    uint64_t steps_between_layers = 0;  // of the steps, decode steps run between a prompt pass's layers
    uint64_t drafted = 0;          // speculative drafts verified
    uint64_t accepted = 0;         // of which kept
    std::vector<PromptCacheEntry> prompt_cache;
    EngineStats engine;
};

class SlotBoard {
public:
    void publish(SlotBoardView view) {
        std::lock_guard lock(mutex_);
        view_ = std::move(view);
    }
    SlotBoardView view() const {
        std::lock_guard lock(mutex_);
        return view_;
    }

private:
    mutable std::mutex mutex_;
    SlotBoardView view_;
};

}  // namespace k3::server
