#include "worker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <variant>

#include "k3/chat.h"
#include "k3/logit_adjust.h"
#include "k3/sampler.h"
#include "stop_matcher.h"

namespace k3::server {

namespace {

constexpr auto kPopTimeout = std::chrono::milliseconds(500);

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Natural-log probabilities of the model's distribution (temperature 1, before any sampling
// filter): the chosen token and the `n_top` most likely ones.
TokenLogprob token_logprob(std::span<const float> logits, int32_t id, int n_top, const Tokenizer& tok) {
    float max_logit = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float l : logits) sum += std::exp(double(l) - max_logit);
    double log_z = max_logit + std::log(sum);
    TokenLogprob out;
    out.id = id;
    out.text = std::string(tok.token_bytes(id));
    out.logprob = float(double(logits[size_t(id)]) - log_z);
    if (n_top > 0) {
        std::vector<int32_t> ids(logits.size());
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
        size_t k = std::min(ids.size(), size_t(n_top));
        std::partial_sort(ids.begin(), ids.begin() + long(k), ids.end(), [&](int32_t a, int32_t b) {
            return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;
        });
        for (size_t i = 0; i < k; ++i)
            out.top.emplace_back(std::string(tok.token_bytes(ids[i])), float(double(logits[size_t(ids[i])]) - log_z));
    }
    return out;
}

// Text produced by one token: through the chat parser (reasoning + content) or the plain
// UTF-8 stream decoder (completions).
class OutputDecoder {
public:
    OutputDecoder(const Tokenizer& tok, const GenerationParams& p) : tok_(tok), skip_special_(p.skip_special) {
        if (p.chat)
            chat_.emplace(tok, p.thinking, p.tools);
        else
            plain_.emplace(tok);
    }
    ChatOutputParser::Delta push(int32_t id) {
        if (chat_) return chat_->push(id);
        ChatOutputParser::Delta d;
        if (!(skip_special_ && tok_.is_special(id))) d.content = plain_->push(id);
        return d;
    }
    ChatOutputParser::Delta flush() {
        if (chat_) return chat_->flush();
        ChatOutputParser::Delta d;
        d.content = plain_->flush();
        return d;
    }
    int tool_calls() const { return chat_ ? chat_->tool_calls() : 0; }

private:
    const Tokenizer& tok_;
    bool skip_special_;
    std::optional<ChatOutputParser> chat_;
    std::optional<StreamDecoder> plain_;
};

JobEvent failure_event(FailureKind kind, const std::string& message, const Usage& usage) {
    JobEvent e;
    e.kind = JobEvent::Kind::Error;
    e.failure = {kind, message};
    e.usage = usage;
    return e;
}

// How a failure is counted in /metrics.
RequestOutcome outcome_of(FailureKind kind) {
    switch (kind) {
        case FailureKind::Cancelled:
        case FailureKind::ShuttingDown: return RequestOutcome::Cancelled;
        case FailureKind::Deadline: return RequestOutcome::Deadline;
        default: return RequestOutcome::Error;
    }
}

}  // namespace

EngineWorker::EngineWorker(Engine& engine, const Tokenizer& tokenizer, JobQueue& queue, Metrics& metrics,
                           WorkerOptions options)
    : engine_(engine), tokenizer_(tokenizer), queue_(queue), metrics_(metrics), options_(std::move(options)) {
    if (engine_.info().eos_token_id >= 0) end_ids_.insert(engine_.info().eos_token_id);
    for (const char* name : {"[EOS]", "<|end_of_msg|>"})
        if (auto id = tokenizer_.special_id(name)) end_ids_.insert(*id);
    token_table_ = std::make_shared<const TokenTable>(tokenizer_, engine_.info().n_vocab,
                                                      std::vector<int32_t>(end_ids_.begin(), end_ids_.end()));
    spdlog::info("grammar token table: {} tokens in {:.3f} s", token_table_->n_vocab(),
                 token_table_->build_seconds());
}

EngineWorker::~EngineWorker() {
    if (thread_.joinable()) {
        queue_.close();
        cancel_current(CancelReason::Shutdown);
        thread_.join();
    }
}

void EngineWorker::start() { thread_ = std::thread([this] { run(); }); }

void EngineWorker::join() {
    if (thread_.joinable()) thread_.join();
}

void EngineWorker::cancel_current(CancelReason reason) {
    std::lock_guard lock(current_mutex_);
    if (current_) current_->request_cancel(reason);
}

void EngineWorker::run() {
    for (;;) {
        if (options_.heartbeat) options_.heartbeat();
        metrics_.set_engine_stats(engine_.stats());
        std::shared_ptr<Job> job = queue_.pop(kPopTimeout);
        if (!job) {
            if (queue_.closed() && queue_.size() == 0) break;
            continue;
        }
        {
            std::lock_guard lock(current_mutex_);
            current_ = job;
        }
        busy_ = true;
        metrics_.set_processing(1);
        try {
            run_job(*job);
        } catch (const std::exception& e) {
            // Tokenizer/chat parser throw on programmer-level surprises; never take the worker down.
            spdlog::error("job {}: {}", job->id, e.what());
            fail(*job, FailureKind::Internal, e.what(), {});
        }
        metrics_.set_processing(0);
        metrics_.set_engine_stats(engine_.stats());
        {
            std::lock_guard lock(current_mutex_);
            current_.reset();
        }
        busy_ = false;
        ++jobs_finished_;
    }
}

bool EngineWorker::emit(Job& job, JobEvent event) {
    if (job.channel->push(std::move(event), options_.slow_client_timeout)) return true;
    job.request_cancel(CancelReason::SlowClient);
    return false;
}

void EngineWorker::fail(Job& job, FailureKind kind, const std::string& message, const Usage& usage) {
    metrics_.count_request(outcome_of(kind));
    emit(job, failure_event(kind, message, usage));
}

void EngineWorker::finish_cancelled(Job& job, const Usage& usage) {
    switch (job.cancel_reason.load()) {
        case CancelReason::Deadline:
            fail(job, FailureKind::Deadline, "the request did not finish within its deadline (--deadline-s)", usage);
            return;
        case CancelReason::Shutdown: fail(job, FailureKind::ShuttingDown, "the server is shutting down", usage); return;
        default:  // the client left or could not keep up: nobody is listening any more
            fail(job, FailureKind::Cancelled, "request cancelled", usage);
    }
}

// Moves the parser's tool-call pieces into the event; a malformed channel is logged and counted
// once (its raw text arrives as content).
void EngineWorker::take_tool_calls(const Job& job, ChatOutputParser::Delta& delta, JobEvent& event, bool& malformed) {
    for (auto& t : delta.tool_calls) event.tool_calls.push_back(std::move(t));
    if (delta.malformed.empty()) return;
    malformed = true;
    event.tool_calls_malformed = true;
    metrics_.count_tool_call_parse_failure();
    spdlog::warn("job {}: malformed tool call, returned as content: {}", job.id, delta.malformed);
}

GrammarMatcher& EngineWorker::matcher_for(const Grammar& g) {
    constexpr size_t kKeep = 4;                  // grammars kept (masks: n_vocab / 8 bytes per state)
    constexpr size_t kMaxReusedStates = 1 << 14;  // a matcher that grew this large starts afresh
    for (auto it = grammars_.begin(); it != grammars_.end(); ++it) {
        if (!it->grammar().same_rules(g)) continue;
        if (it->stats().automaton_states > kMaxReusedStates) {
            grammars_.erase(it);
            break;
        }
        grammars_.splice(grammars_.begin(), grammars_, it);
        grammars_.front().reset();
        return grammars_.front();
    }
    grammars_.emplace_front(g, token_table_);
    if (grammars_.size() > kKeep) grammars_.pop_back();
    return grammars_.front();
}

void EngineWorker::run_job(Job& job) {
    Usage usage;
    usage.prompt_tokens = int(job.prompt.size());
    if (job.cancel.load()) {
        // Left while queued: never started (llama.cpp #13262).
        if (job.cancel_reason.load() == CancelReason::ClientGone) {
            metrics_.count_request(RequestOutcome::Dropped);
            return;
        }
        finish_cancelled(job, usage);
        return;
    }
    if (job.deadline && Clock::now() >= *job.deadline) {
        job.request_cancel(CancelReason::Deadline);
        finish_cancelled(job, usage);
        return;
    }
    if (!session_) session_ = engine_.new_session(options_.n_ctx);

    // Prefill: reuse what the previous job left in the session, evaluate the rest.
    auto prefill_start = Clock::now();
    if (options_.live) options_.live->begin(job, engine_.stats());
    // Whichever way the job ends, the status page stops showing it as active.
    struct EndLive {
        LiveFigures* live;
        uint64_t job_id;
        ~EndLive() { if (live) live->end(job_id); }
    } end_live{options_.live, job.id};
    int reused = 0;
    Status st;
    if (job.params.n > 1 && job.prompt.size() > 1) {
        // n > 1: stop one token short first, so the session keeps a snapshot there; every later
        // choice resumes from it and evaluates only the prompt's last token (a snapshot at the
        // prompt's end is never used: its last token is always evaluated for its logits).
        std::span<const int32_t> all_but_last(job.prompt.data(), job.prompt.size() - 1);
        st = session_->sync(all_but_last, job.cancel, &reused);
    }
    if (st.ok()) {
        int reused_whole = 0;
        st = session_->sync(job.prompt, job.cancel, &reused_whole);
        if (job.params.n <= 1 || job.prompt.size() <= 1) reused = reused_whole;
    }
    usage.cached_tokens = reused;
    if (!st.ok()) {
        switch (st.code) {
            case StatusCode::Cancelled: finish_cancelled(job, usage); return;
            case StatusCode::ContextFull: fail(job, FailureKind::ContextFull, st.message, usage); return;
            case StatusCode::InvalidArgument: fail(job, FailureKind::InvalidPrompt, st.message, usage); return;
            default:
                spdlog::error("job {}: prefill failed: {}", job.id, st.message);
                fail(job, FailureKind::EngineFailed, st.message, usage);
                return;
        }
    }
    metrics_.add_prompt_tokens(usage.prompt_tokens, reused, seconds_since(prefill_start));
    if (options_.live) options_.live->prefilled(job.id, reused, seconds_since(prefill_start), engine_.stats());

    // n > 1: the choices are separate sequences from the same prompt; each later one resumes
    // from the snapshot sync kept at the end of the prompt, so the prompt is evaluated once.
    const int n_choices = std::max(1, job.params.n);
    for (int choice = 0; choice < n_choices; ++choice) {
        if (choice > 0) {
            st = session_->sync(job.prompt, job.cancel, nullptr);
            if (st.code == StatusCode::Cancelled) return finish_cancelled(job, usage);
            if (!st.ok()) {
                spdlog::error("job {}: resuming the prompt for choice {} failed: {}", job.id, choice, st.message);
                return fail(job, FailureKind::EngineFailed, st.message, usage);
            }
        }
        if (!generate(job, choice, choice + 1 == n_choices, usage)) return;
    }
}

// One choice: sample until the end of the turn, a stop, max_tokens or a full context, streaming
// events tagged with the choice. False when the job ended (cancelled or failed) instead.
bool EngineWorker::generate(Job& job, int choice, bool last_choice, Usage& usage) {
    const GenerationParams& p = job.params;
    SamplingParams sampling = p.sampling;
    sampling.seed += uint64_t(choice);  // distinct draws per choice, reproducible for a seed
    Sampler sampler(sampling);
    LogitAdjuster adjust(p.adjustments);
    OutputDecoder decoder(tokenizer_, p);
    StopMatcher stop(p.stop);
    FinishReason finish_reason = FinishReason::Length;
    bool tool_calls_malformed = false;
    auto decode_start = Clock::now();
    auto last_token_at = Clock::now();
    bool cancelled = false;
    int generated = 0;
    JobEvent last;

    // Constrained output: the grammar masks each step's logits (allowed ones keep their values)
    // after any penalties and biases and before the sampler.
    GrammarMatcher* grammar = p.grammar ? &matcher_for(*p.grammar) : nullptr;
    std::vector<float> masked;

    for (int n = 0; n < p.max_tokens; ++n) {
        std::span<const float> logits = session_->logits();
        // Penalties and biases, then (constrained runs) the grammar mask, then the sampler.
        std::span<const float> scores = adjust.apply(logits);
        if (grammar) {
            masked.assign(scores.begin(), scores.end());
            grammar->mask_logits(masked, p.max_tokens - n);
            scores = masked;
        }
        int32_t id = sampler.sample(scores);
        if (grammar && !grammar->accept(id)) {
            // Only possible if the tokenizer cannot spell what the grammar needs next.
            spdlog::error("job {}: grammar: no allowed token after {} tokens", job.id, n);
            fail(job, FailureKind::Internal, "constrained decoding found no token the output format allows", usage);
            return false;
        }
        adjust.observe(id);
        auto now = Clock::now();
        if (n == 0 && choice == 0)
            metrics_.observe_ttft(std::chrono::duration<double>(now - job.enqueued_at).count());
        else
            metrics_.observe_token_latency(std::chrono::duration<double>(now - last_token_at).count());
        last_token_at = now;
        usage.completion_tokens++;
        generated++;
        if (options_.live) {
            // Live figures per token (the worker is the only thread that may ask the engine).
            EngineStats stats = engine_.stats();
            metrics_.set_engine_stats(stats);
            options_.live->token(job.id, stats);
        }

        JobEvent event;
        event.choice = choice;
        if (p.logprobs >= 0) event.logprobs.push_back(token_logprob(logits, id, p.logprobs, tokenizer_));
        bool end = (!p.ignore_eos && end_ids_.count(id) > 0) ||
                   std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) != p.stop_token_ids.end();
        if (!end) {
            auto delta = decoder.push(id);
            if (!delta.reasoning.empty()) usage.reasoning_tokens++;
            take_tool_calls(job, delta, event, tool_calls_malformed);
            event.reasoning = std::move(delta.reasoning);
            event.content = stop.push(delta.content);
            end = delta.end_of_turn || stop.stopped();
            // parallel_tool_calls false: one call, then the turn is over.
            if (!p.parallel_tool_calls && decoder.tool_calls() > 0 && !tool_calls_malformed) end = true;
        }
        if (grammar && grammar->finished()) end = true;  // the output is complete
        if (end) finish_reason = FinishReason::Stop;
        if (end || n + 1 == p.max_tokens) {
            // The last token's text travels with the Done event, so that finish_reason sits on
            // the last content chunk (OpenAI streaming contract).
            last = std::move(event);
            break;
        }
        if (event.has_output())
            if (!emit(job, std::move(event))) {
                cancelled = true;
                break;
            }

        if (options_.heartbeat && now - last_heartbeat_ > std::chrono::seconds(1)) {
            options_.heartbeat();
            last_heartbeat_ = now;
        }
        if (job.deadline && now >= *job.deadline) job.request_cancel(CancelReason::Deadline);
        if (job.cancel.load()) {
            cancelled = true;
            break;
        }
        Status st = session_->append(id, job.cancel);
        if (st.code == StatusCode::Cancelled) {
            cancelled = true;
            break;
        }
        if (st.code == StatusCode::ContextFull) break;  // finish_reason "length": the context is full
        if (!st.ok()) {
            metrics_.add_generated_tokens(generated, seconds_since(decode_start));
            spdlog::error("job {}: decode failed: {}", job.id, st.message);
            fail(job, FailureKind::EngineFailed, st.message, usage);
            return false;
        }
    }
    metrics_.add_generated_tokens(generated, seconds_since(decode_start));
    if (cancelled) {
        finish_cancelled(job, usage);
        return false;
    }
    // What the decoder and the stop matcher still hold (unless a stop string ended the text)
    // joins the last token's text in the Done event.
    JobEvent done = std::move(last);
    done.choice = choice;
    done.last_choice = last_choice;
    if (!stop.stopped()) {
        auto rest = decoder.flush();
        take_tool_calls(job, rest, done, tool_calls_malformed);
        done.reasoning += rest.reasoning;
        done.content += stop.push(rest.content);
        done.content += stop.flush();
    }
    done.kind = JobEvent::Kind::Done;
    // A turn that ended after well-formed calls finished by calling tools.
    if (finish_reason == FinishReason::Stop && decoder.tool_calls() > 0 && !tool_calls_malformed)
        finish_reason = FinishReason::ToolCalls;
    done.finish_reason = finish_reason;
    done.usage = usage;
    if (last_choice) metrics_.count_request(RequestOutcome::Ok);  // counted before the client can see it
    emit(job, std::move(done));
    return true;
}

}  // namespace k3::server
