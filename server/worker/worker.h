// EngineWorker: the one thread that owns the Engine and its Sessions (docs/operations.md). It runs
// up to `parallel` jobs at once (continuous batching), one per slot, each slot with a Session of
// its own; the engine's prompt cache is shared by all of them, so a job resumes from the longest
// cached prefix of any earlier job. Each engine step evaluates the next token of every decoding
// job together (one pass over the weights for all of them) plus, when a job is still reading
// its prompt, one chunk of that prompt (the job that has waited longest first); a chunk longer
// than interleave_tokens is a pass of its own, and the decoding jobs step between its layers
// (decode_wait_s; docs/performance.md "Other streams during a prefill"). Between steps each
// job samples, turns tokens into text at UTF-8 boundaries (chat output through the chat
// parser), applies stop strings and streams JobEvents into its channel, and its cancel flag is
// checked: a job that leaves frees its slot without touching the others.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "worker/job.h"
#include "worker/job_queue.h"
#include "k3/chat.h"
#include "k3/engine.h"
#include "k3/grammar.h"
#include "k3/tokenizer.h"
#include "worker/live_figures.h"
#include "worker/token_observer.h"
#include "ops/metrics.h"
#include "ops/slot_board.h"

namespace k3::server {

struct WorkerOptions {
    int n_ctx = 0;                                           // session context (tokens)
    int parallel = 1;                                        // jobs run at once (slots)
    int draft_max = 0;                                       // speculative drafts per step at most (0: off)
    SlotBoard* board = nullptr;                              // where /slots reads from (optional)
    size_t client_buffer_bytes = 1 << 20;                    // output a client has not taken -> cancel job
    std::function<void()> heartbeat;                         // called at least once a second (liveness)
    std::function<void(const std::string&)> on_io_error;     // an engine read failed while serving
    LiveFigures* live = nullptr;                             // per-token figures for /v1/status
    // A prompt whose client left goes on into the prompt cache for at most this long after it
    // left, and a request for the same prompt joins it (docs/agents.md); 0: it stops at once.
    double abandoned_prefill_s = 0;
    // While other jobs decode, a prompt's pass in the same step takes at most this many tokens
    // (docs/performance.md, "Other streams during a prefill").
    size_t interleave_tokens = 64;
    // A prompt's pass longer than that runs on its own while others decode, and they take decode
    // steps between its layers: before its first, then whenever one of them has waited this
    // long since its last token (seconds; 0: off, the pass is cut to interleave_tokens instead).
    double decode_wait_s = 0;
    // Test hook (--test-hold-prefill, prefill_held): while this file exists, a prompt that has
    // read a pass waits before its next. "" = none.
    std::string hold_prefill_file;
};

class EngineWorker {
public:
    EngineWorker(Engine& engine, const Tokenizer& tokenizer, JobQueue& queue, Metrics& metrics,
                 WorkerOptions options);
    ~EngineWorker();

    void start();
    // Returns once the queue is closed and empty and the running jobs have finished.
    void join();
    // Cancels the jobs being run now, if any (shutdown after the drain timeout).
    void cancel_current(CancelReason reason);
    bool busy() const { return busy_.load(); }
    uint64_t jobs_finished() const { return jobs_finished_.load(); }
    // What each token spells (built at start-up): the HTTP threads compile grammars over it.
    std::shared_ptr<const TokenTable> token_table() const { return token_table_; }

private:
    struct Slot;
    void run();
    void admit(Slot& slot, std::shared_ptr<Job> job);
    bool produce_token(Slot& slot, std::span<const float> logits);
    void verify_drafts(Slot& slot);
    void finish_ok(Slot& slot);
    void start_choice(Slot& slot, int choice);
    void finish_failed(Slot& slot, const Status& st);
    void retire(Slot& slot, std::optional<JobEvent> last);
    bool step();
    void decode_items(std::vector<Engine::StepItem>& items, std::vector<Slot*>& members, size_t& budget);
    bool prompt_pass_alone(Slot& prefill, std::span<const int32_t> chunk);
    void decode_between_layers(int il);
    void take_pending_token(Slot& slot);
    void finish_step(const std::vector<Slot*>& members, const Status& st);
    bool prefill_held() const;
    void publish_board(bool force);
    bool emit(Job& job, JobEvent event);
    void fail(Slot& slot, FailureKind kind, const std::string& message);
    void take_tool_calls(const Job& job, ChatOutputParser::Delta& delta, JobEvent& event, bool& malformed);
    void finish_cancelled(Slot& slot);
    bool read_on_abandoned(Slot& slot);
    void finish_abandoned(Slot& slot);
    void join_abandoned(Slot& slot, std::shared_ptr<Job> job);

    Engine& engine_;
    const Tokenizer& tokenizer_;
    JobQueue& queue_;
    Metrics& metrics_;
    WorkerOptions options_;
    TokenObserver observer_;     // per-token metrics and live figures
    std::set<int32_t> end_ids_;  // tokens that end generation (EOS, end of message)
    std::shared_ptr<const TokenTable> token_table_;  // what each token spells, for grammars
    std::vector<std::unique_ptr<Slot>> slots_;
    uint64_t admissions_ = 0;            // admission order (fair prefill: lowest first)
    uint64_t steps_ = 0, batched_tokens_ = 0;
    uint64_t steps_between_layers_ = 0;  // decode steps run inside a prompt's pass
    uint64_t drafted_ = 0, accepted_ = 0;  // speculative drafts verified / kept
    Clock::time_point last_board_{};
    std::thread thread_;
    std::mutex current_mutex_;
    std::vector<std::shared_ptr<Job>> current_;  // the jobs in the slots (for cancel_current)
    std::atomic<bool> busy_{false};
    std::atomic<uint64_t> jobs_finished_{0};
    Clock::time_point last_heartbeat_{};
};

}  // namespace k3::server
