// EngineWorker: the one thread that owns the Engine and its Session (house style 3.6). It takes
// jobs from the JobQueue one at a time, brings the session to the job's prompt with
// Session::sync (which reuses the longest verified prefix left by the previous job), samples
// token by token, turns tokens into text at UTF-8 boundaries (chat output through the chat
// parser), applies stop strings and streams JobEvents into the job's channel. It checks the
// job's cancel flag between tokens; the engine checks it between layers during prefill.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "job.h"
#include "job_queue.h"
#include "k3/chat.h"
#include "k3/engine.h"
#include "k3/grammar.h"
#include "k3/tokenizer.h"
#include "live_figures.h"
#include "metrics.h"

namespace k3::server {

struct WorkerOptions {
    int n_ctx = 0;                                           // session context (tokens)
    std::chrono::milliseconds slow_client_timeout{10000};   // full channel this long -> cancel job
    std::function<void()> heartbeat;                         // called at least once a second (watchdog)
    LiveFigures* live = nullptr;                             // per-token figures for /v1/status
};

class EngineWorker {
public:
    EngineWorker(Engine& engine, const Tokenizer& tokenizer, JobQueue& queue, Metrics& metrics,
                 WorkerOptions options);
    ~EngineWorker();

    void start();
    // Returns once the queue is closed and empty and the current job has finished.
    void join();
    // Cancels the job being run now, if any (shutdown after the drain timeout).
    void cancel_current(CancelReason reason);
    bool busy() const { return busy_.load(); }
    uint64_t jobs_finished() const { return jobs_finished_.load(); }
    const TokenTable& token_table() const { return *token_table_; }

private:
    void run();
    void run_job(Job& job);
    bool generate(Job& job, int choice, bool last_choice, Usage& usage);
    bool emit(Job& job, JobEvent event);
    void fail(Job& job, FailureKind kind, const std::string& message, const Usage& usage);
    void take_tool_calls(const Job& job, ChatOutputParser::Delta& delta, JobEvent& event, bool& malformed);
    void finish_cancelled(Job& job, const Usage& usage);

    Engine& engine_;
    const Tokenizer& tokenizer_;
    JobQueue& queue_;
    Metrics& metrics_;
    WorkerOptions options_;
    std::set<int32_t> end_ids_;  // tokens that end generation (EOS, end of message)
    std::shared_ptr<const TokenTable> token_table_;  // what each token spells, for grammars
    // Matchers of recent grammars, most recent first: agents send the same schema every turn,
    // and a reused matcher keeps its automaton and cached masks.
    std::list<GrammarMatcher> grammars_;
    GrammarMatcher& matcher_for(const Grammar& grammar);
    std::unique_ptr<Session> session_;
    std::thread thread_;
    std::mutex current_mutex_;
    std::shared_ptr<Job> current_;
    std::atomic<bool> busy_{false};
    std::atomic<uint64_t> jobs_finished_{0};
    Clock::time_point last_heartbeat_{};
};

}  // namespace k3::server
