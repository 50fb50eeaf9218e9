// What the HTTP threads share: settings, metrics, the job queue, the daemon's phase and, once
// loaded, the model facts and the tokenizer (immutable, so any thread may use it). Owned by
// serve_main (or a test), outlives the Router and the EngineWorker.
#pragma once
#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "settings/daemon_config.h"
#include "worker/job_queue.h"
#include "worker/live_figures.h"
#include "k3/engine.h"
#include "k3/tokenizer.h"
#include "ops/liveness.h"
#include "ops/metrics.h"
#include "wire/generation_request.h"
#include "ops/slot_board.h"

namespace k3::server {

enum class Phase { Loading, Ready, Draining, Failed };

struct ServerState {
    explicit ServerState(DaemonConfig c) : config(std::move(c)), queue(size_t(config.queue_depth)) {}

    const DaemonConfig config;
    Metrics metrics;
    LiveFigures live;                   // what the worker is doing now, for /v1/status
    JobQueue queue;
    SlotBoard board;                    // what the worker runs now (GET /slots)
    std::atomic<Phase> phase{Phase::Loading};
    long long start_time = 0;           // unix seconds, for "created" in /v1/models

    // Set before phase becomes Ready, read-only afterwards.
    const Tokenizer* tokenizer = nullptr;
    const Engine* engine = nullptr;     // only for its thread-safe weights_load()
    ModelInfo info;
    ModelLimits limits;
    std::shared_ptr<const TokenTable> token_table;  // the worker's, for compiling request grammars

    void set_status(const std::string& s) {
        std::lock_guard lock(mutex_);
        status_ = s;
    }
    std::string status() const {
        std::lock_guard lock(mutex_);
        return status_;
    }
    // How far the weights are read (0 / 0 until loaded: the trunk is read before the phase is
    // Ready; with background loading the experts go on loading after it).
    WeightsLoad weights_load() const {
        Phase p = phase.load();
        return (p == Phase::Ready || p == Phase::Draining) && engine ? engine->weights_load() : WeightsLoad{};
    }
    std::atomic<uint64_t> next_job_id{1};
    std::atomic<int> open_streams{0};   // handlers still talking to a client (drain waits for 0)
    Liveness* liveness = nullptr;       // set by serve_main (and tests) once the worker runs

private:
    mutable std::mutex mutex_;
    std::string status_ = "loading";
};

}  // namespace k3::server
