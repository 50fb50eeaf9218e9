// The Engine behind engine.h: the opened checkpoint, its weight store, the model (kernels,
// threads, layouts, resident model-level tensors, scratch) and the counters. Sessions
// (session.cpp) evaluate through it.
#pragma once
#include <algorithm>
#include <chrono>
#include <memory>

#include "weights/checkpoint.h"
#include "api/prompt_cache.h"
#include "k3/engine.h"
#include "k3/forward_stages.h"
#include "model/model.h"
#include "parallel/expert_parallel.h"
#include "store/weight_store.h"
#include "vision/vision_tower.h"

namespace k3 {

class EngineImpl final : public Engine {
public:
    EngineImpl(const EngineOptions& options, const std::function<void(const std::string&)>& progress);

    const ModelInfo& info() const override { return info_; }
    EngineStats stats() const override;
    ForwardStageSeconds stage_seconds() const;  // k3/forward_stages.h, forward_stage_seconds
    std::unique_ptr<Session> new_session(int n_ctx) override;
    Status step(std::span<const StepItem> items) override;
    Status step_between_layers(std::span<const StepItem> items, const BetweenLayers& between_layers) override;
    int max_step_tokens() const override { return model_->act.max_tokens; }
    int max_pass_tokens_keeping_lm_head() const override {
        const int n = model_->store.pass_tokens_keeping_lm_head();
        return n < 0 ? model_->act.max_tokens : std::min(n, model_->act.max_tokens);
    }
    std::vector<PromptCacheEntry> prompt_cache_entries() const override;
    uint64_t progress() const override { return model_->layers_evaluated.load(std::memory_order_relaxed); }
    // The store's load, and a failed rank of expert parallelism as a failure of the weights:
    // /health turns 503 naming it (docs/operations.md "Several machines").
    WeightsLoad weights_load() const override;
    std::vector<float> encode_image(const PreparedImage& image) override;

    // forward_batch() plus the engine's counters; every Session evaluation goes through here.
    // between_layers: forward_batch's hook (null: none).
    Status evaluate_batch(std::span<const ForwardItem> items, const CancelFlag* cancel,
                          const BetweenLayers* between_layers = nullptr);
    Status evaluate(SequenceState& st, std::span<const int32_t> tokens, float* logits, bool all_logits,
                    const CancelFlag* cancel) {
        const ForwardItem one{&st, tokens, logits, all_logits};
        return evaluate_batch(std::span<const ForwardItem>(&one, 1), cancel);
    }
    PromptCache& prompt_cache() { return *prompt_cache_; }

    Model& model() { return *model_; }
    const ModelConfig& config() const { return ckpt_.config; }
    int n_threads() const { return n_threads_; }

private:
    Checkpoint ckpt_;
    std::unique_ptr<parallel::ExpertLeader> leader_;  // expert parallelism's rank 0 (null: one process)
    std::unique_ptr<WeightStore> store_;
    int n_threads_ = 1;
    std::unique_ptr<Model> model_;
    std::unique_ptr<PromptCache> prompt_cache_;
    std::unique_ptr<VisionWeights> vision_;  // null: text only
    VisionSettings vision_settings_;
    ModelInfo info_;
    uint64_t tokens_evaluated_ = 0;
    uint64_t passes_ = 0;
    double forward_seconds_ = 0;
    double side_seconds_ = 0;  // of forward_seconds_, steps run between a pass's layers (counted once)
};

std::unique_ptr<Session> make_session(EngineImpl& engine, int n_ctx);
Status step_sessions(EngineImpl& engine, std::span<const Engine::StepItem> items,
                     const BetweenLayers* between_layers = nullptr);

// FNV-1a 64 over config.json, every shard's name, size and header bytes: identifies the model
// and its weights (state is only reused under the same fingerprint).
std::string checkpoint_fingerprint(const Checkpoint& ckpt);

// The one place a kernel-set request is decided: EngineOptions::kernels (--kernels), or when that
// is empty the K3_KERNELS environment variable (tests, benchmarks); "" is the best set for this
// CPU and build, a set this CPU or build lacks is refused (k3::Error Usage).
const Kernels& choose_kernels(std::string name);

}  // namespace k3
