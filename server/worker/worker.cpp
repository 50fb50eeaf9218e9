#include "worker/worker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <thread>
#include <variant>

#include "k3/chat.h"
#include "k3/next_token.h"
#include "worker/prompt_lookup.h"
#include "worker/stop_matcher.h"
#include "worker/token_observer.h"
#include "worker/token_output.h"

namespace k3::server {

namespace {

constexpr auto kPopTimeout = std::chrono::milliseconds(500);
constexpr auto kBoardInterval = std::chrono::milliseconds(200);

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The usage a response reports: the prompt without the chat's generation opener, as the hosted
// API counts it (docs/api.md "Thinking", usage); the cached share within it.
Usage reported_usage_of(Usage usage, int uncounted) {
    usage.prompt_tokens = std::max(0, usage.prompt_tokens - uncounted);
    usage.cached_tokens = std::min(usage.cached_tokens, usage.prompt_tokens);
    return usage;
}

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

// One running job and everything it carries between steps.
struct EngineWorker::Slot {
    int index = 0;
    std::unique_ptr<Session> session;   // kept across jobs (its live state is reused too)
    std::shared_ptr<Job> job;           // null: idle
    bool decoding = false;              // false: still evaluating the prompt
    uint64_t order = 0;                 // admission order
    Usage usage;                        // over all of the job's choices
    int choice = 0;                     // which of the job's n choices is being generated
    int generated = 0;                  // tokens of this choice
    std::optional<NextToken> next;      // adjust, mask, sample (the choice's own sampler and grammar)
    std::optional<OutputDecoder> decoder;
    std::optional<StopMatcher> stop;
    FinishReason finish_reason = FinishReason::Length;
    JobEvent last;                      // the last token's text, sent with Done
    bool tool_calls_malformed = false;
    Clock::time_point admitted_at, decode_start, last_token_at;
    int32_t next_token = -1;            // sampled, evaluated by the next step; -1: logits are ready
    std::vector<int32_t> step_tokens;   // what the current step evaluates: next_token, then drafts
    size_t drafts = 0;                  // drafts among step_tokens
    std::optional<DraftHorizon> horizon;
    std::optional<Clock::time_point> abandoned_at;  // its client left while the prompt was read
};

EngineWorker::EngineWorker(Engine& engine, const Tokenizer& tokenizer, JobQueue& queue, Metrics& metrics,
                           WorkerOptions options)
    : engine_(engine),
      tokenizer_(tokenizer),
      queue_(queue),
      metrics_(metrics),
      options_(std::move(options)),
      observer_(engine_, metrics_, options_.live) {
    if (engine_.info().eos_token_id >= 0) end_ids_.insert(engine_.info().eos_token_id);
    for (const char* name : {"[EOS]", "<|end_of_msg|>"})
        if (auto id = tokenizer_.special_id(name)) end_ids_.insert(*id);
    token_table_ = std::make_shared<const TokenTable>(tokenizer_, engine_.info().n_vocab,
                                                      std::vector<int32_t>(end_ids_.begin(), end_ids_.end()));
    spdlog::info("grammar token table: {} tokens in {:.3f} s", token_table_->n_vocab(),
                 token_table_->build_seconds());
    for (int i = 0; i < std::max(1, options_.parallel); ++i) {
        slots_.push_back(std::make_unique<Slot>());
        slots_.back()->index = i;
    }
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
    for (auto& job : current_) job->request_cancel(reason);
}

void EngineWorker::run() {
    for (;;) {
        const auto now = Clock::now();
        if (options_.heartbeat && now - last_heartbeat_ > std::chrono::seconds(1)) {
            options_.heartbeat();
            last_heartbeat_ = now;
        }
        // A waiting request for the very prompt an abandoned prefill is reading takes it over.
        for (auto& slot : slots_) {
            if (!slot->job || !slot->abandoned_at) continue;
            const Job& reading = *slot->job;
            auto same = queue_.take_first([&](const std::shared_ptr<Job>& j) {
                return j->cache_partition == reading.cache_partition && j->prompt == reading.prompt;
            });
            if (same) join_abandoned(*slot, std::move(*same));
        }
        // Fill idle slots; wait for work only when nothing runs.
        for (auto& slot : slots_) {
            if (slot->job) continue;
            const bool idle = std::none_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->job != nullptr; });
            std::shared_ptr<Job> job = queue_.pop(idle ? kPopTimeout : std::chrono::milliseconds(0)).value_or(nullptr);
            if (!job) break;
            admit(*slot, std::move(job));
        }
        if (std::none_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->job != nullptr; })) {
            publish_board(false);
            if (queue_.closed() && queue_.size() == 0) break;
            continue;
        }
        // Jobs whose logits are ready take their next token; jobs still in their prompt may
        // have been cancelled or run out of time.
        for (auto& slot : slots_) {
            if (!slot->job) continue;
            try {
                if (slot->decoding && slot->next_token < 0) {
                    produce_token(*slot, slot->session->logits());
                } else if (!slot->decoding && slot->job->cancel.load() && !read_on_abandoned(*slot)) {
                    finish_cancelled(*slot);
                }
            } catch (const std::exception& e) {
                spdlog::error("job {}: {}", slot->job->id, e.what());
                fail(*slot, FailureKind::Internal, e.what());
            }
        }
        if (prefill_held()) {
            publish_board(false);
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            continue;
        }
        step();
        publish_board(false);
    }
    publish_board(true);
}

// Test hook (docs/development.md, "Tests wait on states"): while the file
// WorkerOptions::hold_prefill_file names exists, a prompt that has evaluated a pass waits before
// its next one (the worker goes on beating, admitting and cancelling), so a test reads the daemon
// mid-prefill without racing it.
bool EngineWorker::prefill_held() const {
    if (options_.hold_prefill_file.empty()) return false;
    const bool mid_prompt = std::any_of(slots_.begin(), slots_.end(), [](const auto& s) {
        return s->job && !s->decoding && s->session && s->session->tokens().size() > size_t(s->usage.cached_tokens);
    });
    std::error_code ec;
    return mid_prompt && std::filesystem::exists(options_.hold_prefill_file, ec);
}

void EngineWorker::admit(Slot& slot, std::shared_ptr<Job> job_ptr) {
    slot.job = std::move(job_ptr);
    {
        std::lock_guard lock(current_mutex_);
        current_.push_back(slot.job);
    }
    busy_ = true;
    Job& job = *slot.job;
    slot.usage = Usage{};
    slot.usage.prompt_tokens = int(job.prompt.size());
    slot.decoding = false;
    slot.next_token = -1;
    slot.order = ++admissions_;
    slot.admitted_at = Clock::now();
    slot.finish_reason = FinishReason::Length;
    slot.last = JobEvent{};
    slot.tool_calls_malformed = false;
    slot.abandoned_at.reset();
    if (job.cancel.load()) {
        // Left while queued: never started (llama.cpp #13262).
        if (job.cancel_reason.load() == CancelReason::ClientGone) {
            metrics_.count_request(RequestOutcome::Dropped);
            retire(slot, std::nullopt);
        } else {
            finish_cancelled(slot);
        }
        return;
    }
    if (options_.live) options_.live->begin(job, engine_.stats());
    try {
        if (!slot.session) slot.session = engine_.new_session(options_.n_ctx);
        // Resume from the longest prefix this slot's state or the shared prompt cache holds, of
        // the job's own partition only (another key's live state in this slot is dropped).
        slot.session->set_cache_partition(job.cache_partition);
        int reused = 0;
        slot.session->set_prompt_images(job.images);
        const Status st = slot.session->begin_prompt(job.prompt, &reused);
        slot.usage.cached_tokens = reused;
        if (!st.ok()) {
            finish_failed(slot, st);
            return;
        }
        job.prompt_cached.store(reused);
        if (options_.live) options_.live->prompt_begun(job.id, reused);
        const GenerationParams& p = job.params;
        start_choice(slot, 0);
        metrics_.set_processing(int(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s->job != nullptr; })));
        if (slot.session->prompt_pending() == 0) {
            slot.decoding = true;
            slot.decode_start = slot.last_token_at = Clock::now();
            metrics_.add_prompt_tokens(slot.usage.prompt_tokens, reused, 0.0);
            if (options_.live) options_.live->prefilled(job.id, reused, 0.0, engine_.stats());
            if (p.max_tokens == 0) finish_ok(slot);
        }
    } catch (const std::exception& e) {
        spdlog::error("job {}: {}", job.id, e.what());
        fail(slot, FailureKind::Internal, e.what());
    }
}

// Samples the slot's next token from its logits and streams its text. Returns true when the
// job goes on (the token is evaluated by the next step), false when it finished.
bool EngineWorker::produce_token(Slot& slot, std::span<const float> logits) {
    Job& job = *slot.job;
    const GenerationParams& p = job.params;
    const NextToken::Choice choice = slot.next->choose(logits, p.max_tokens - slot.generated);
    const int32_t id = choice.id;
    if (!choice.allowed) {
        spdlog::error("job {}: grammar: no allowed token after {} tokens", job.id, slot.generated);
        fail(slot, FailureKind::Internal, "constrained decoding found no token the output format allows");
        return false;
    }
    const auto now = Clock::now();
    observer_.token(job, slot.usage.completion_tokens == 0, slot.last_token_at, now);
    slot.last_token_at = now;
    slot.usage.completion_tokens++;
    slot.generated++;

    JobEvent event;
    event.choice = slot.choice;
    if (p.logprobs >= 0) event.logprobs.push_back(token_logprob(logits, id, p.logprobs, tokenizer_));
    bool end = choice.ends;
    if (!end) {
        auto delta = slot.decoder->push(id);
        if (!delta.reasoning.empty()) slot.usage.reasoning_tokens++;
        take_tool_calls(job, delta, event, slot.tool_calls_malformed);
        event.reasoning = std::move(delta.reasoning);
        event.content = slot.stop->push(delta.content);
        end = delta.end_of_turn || slot.stop->stopped();
        // parallel_tool_calls false: one call, then the turn is over.
        if (!p.parallel_tool_calls && slot.decoder->tool_calls() > 0 && !slot.tool_calls_malformed) end = true;
    }
    if (slot.next->output_complete()) end = true;
    if (end) slot.finish_reason = FinishReason::Stop;
    // The context is full: the job ends with "length" (without failing the others' step).
    const bool full = slot.session->tokens().size() + 1 > size_t(slot.session->n_ctx());
    if (end || slot.generated >= p.max_tokens || full) {
        // The last token's text travels with the Done event, so that finish_reason sits on
        // the last content chunk (OpenAI streaming contract).
        slot.last = std::move(event);
        finish_ok(slot);
        return false;
    }
    bool cancelled = false;
    if (event.has_output()) cancelled = !emit(job, std::move(event));
    if (cancelled || job.cancel.load()) {
        metrics_.add_generated_tokens(slot.generated, seconds_since(slot.decode_start));
        finish_cancelled(slot);
        return false;
    }
    slot.next_token = id;
    return true;
}

// The next tokens of every decoding job (each with its drafts) within `budget` tokens of a step:
// their items and slots.
void EngineWorker::decode_items(std::vector<Engine::StepItem>& items, std::vector<Slot*>& members, size_t& budget) {
    for (auto& slot : slots_) {
        if (!slot->job || !slot->decoding || slot->next_token < 0 || budget == 0) continue;
        // the sampled token, then drafts found by prompt lookup (within the generation's and the
        // context's room and the step's budget)
        Session& session = *slot->session;
        slot->step_tokens.assign(1, slot->next_token);
        // (the last verified row yields one token more than the drafts it checks)
        const size_t room = std::min({size_t(std::max(0, slot->job->params.max_tokens - slot->generated - 1)),
                                      size_t(session.n_ctx()) - session.tokens().size() - 1, budget - 1});
        // (no drafts under a grammar: its matcher follows the produced tokens only)
        const size_t want = slot->next->constrained() ? 0 : std::min(size_t(slot->horizon->next()), room);
        if (want > 0) {
            std::vector<int32_t> seq(session.tokens().begin(), session.tokens().end());
            seq.push_back(slot->next_token);
            const std::vector<int32_t> d = prompt_lookup_draft(seq, int(want));
            // (an image's row ids are no tokens: a draft ends before one)
            const auto end = std::find_if(d.begin(), d.end(), [&](int32_t id) { return is_image_row_id(id, engine_.info().n_vocab); });
            slot->step_tokens.insert(slot->step_tokens.end(), d.begin(), end);
        }
        slot->drafts = slot->step_tokens.size() - 1;
        items.push_back({&session, slot->step_tokens, slot->drafts > 0, &slot->job->cancel});
        members.push_back(slot.get());
        budget -= slot->step_tokens.size();
    }
}

// One engine step: every decoding job's next token, plus one prompt chunk: of a prompt this step
// finishes if one waits, else of the job that has waited longest (docs/performance.md, "Other
// streams during a prefill"). A chunk of at most --interleave-tokens shares the step with the
// decode tokens (one read of the weights for both). A longer one, with --decode-wait-s on, is a
// pass of its own, and the decoding jobs step between its layers (decode_between_layers); with
// it off, the chunk is cut to --interleave-tokens instead. Returns false when there was nothing
// to evaluate.
bool EngineWorker::step() {
    std::vector<Engine::StepItem> items;
    std::vector<Slot*> members;
    const size_t step_tokens = size_t(engine_.max_step_tokens());
    size_t budget = step_tokens;
    decode_items(items, members, budget);
    const size_t n_decode = items.size();
    const bool between_layers = options_.decode_wait_s > 0;
    // What rides along with the decode tokens: at most --interleave-tokens of a prompt.
    const size_t ride = std::min(budget, options_.interleave_tokens);
    // A pass with decode steps between its layers keeps the lm_head, so it may hold fewer
    // tokens than a pass of its own (Engine::max_pass_tokens_keeping_lm_head).
    const size_t alone = size_t(std::max(0, engine_.max_pass_tokens_keeping_lm_head()));
    const size_t max = n_decode == 0 ? budget : between_layers && alone > ride ? alone : ride;
    // A prompt this step finishes goes first (a short request that arrived during a long
    // prompt's pass is answered after that pass, not after the whole long prompt), then the one
    // that has waited longest; an abandoned one only when no client waits on another.
    Slot* prefill = nullptr;
    auto before = [max](const Slot& a, const Slot& b) {
        if (a.abandoned_at.has_value() != b.abandoned_at.has_value()) return !a.abandoned_at;
        const bool a_fits = a.session->prompt_pending() <= max, b_fits = b.session->prompt_pending() <= max;
        return a_fits != b_fits ? a_fits : a.order < b.order;
    };
    for (auto& slot : slots_)
        if (slot->job && !slot->decoding && (!prefill || before(*slot, *prefill))) prefill = slot.get();
    if (prefill && max > 0) {
        std::span<const int32_t> chunk = prefill->session->next_prompt_chunk(max);
        if (n_decode > 0 && between_layers && chunk.size() > ride) return prompt_pass_alone(*prefill, chunk);
        // (the prompt's own flag: a client that leaves does not stop a chunk that may finish
        // into the prompt cache)
        items.push_back({prefill->session.get(), chunk, false, &prefill->job->stop_prefill});
        members.push_back(prefill);
        if (options_.live && prefill->choice == 0)
            options_.live->prompt_chunk_started(prefill->job->id, int(items.back().tokens.size()));
    }
    if (items.empty()) return false;

    const Status st = engine_.step(items);
    ++steps_;
    if (items.size() > 1) batched_tokens_ += n_decode;
    finish_step(members, st);
    return true;
}

// A prompt's pass on its own while other jobs decode: they take their decode steps between its
// layers (before the first, and then whenever one of them has waited --decode-wait-s), so none
// waits for the whole pass.
bool EngineWorker::prompt_pass_alone(Slot& prefill, std::span<const int32_t> chunk) {
    const Engine::StepItem item{prefill.session.get(), chunk, false, &prefill.job->stop_prefill};
    if (options_.live && prefill.choice == 0) options_.live->prompt_chunk_started(prefill.job->id, int(chunk.size()));
    const Engine::BetweenLayers hook = [this](int il) { decode_between_layers(il); };
    const Status st = engine_.step_between_layers(std::span<const Engine::StepItem>(&item, 1), hook);
    ++steps_;
    finish_step({&prefill}, st);
    return true;
}

// Inside a prompt's pass (prompt_pass_alone), before layer il: the decoding jobs' step, when due.
// The pass's slot is not decoding, so it is none of them; a job that ends here frees its slot
// (admission waits for the pass's end).
void EngineWorker::decode_between_layers(int il) {
    const auto now = Clock::now();
    if (options_.heartbeat && now - last_heartbeat_ > std::chrono::seconds(1)) {
        options_.heartbeat();
        last_heartbeat_ = now;
    }
    // logits a job has not taken yet (a next choice resumed from the prompt cache): its token first
    for (auto& slot : slots_) take_pending_token(*slot);
    // due before the pass's first layer (the step the pass took from them), then once a job has
    // waited the bound since its last token
    double waited = -1;
    for (auto& slot : slots_)
        if (slot->job && slot->decoding && slot->next_token >= 0)
            waited = std::max(waited, seconds_since(slot->last_token_at));
    if (waited < 0 || (il > 0 && waited < options_.decode_wait_s)) return;
    std::vector<Engine::StepItem> items;
    std::vector<Slot*> members;
    size_t budget = size_t(engine_.max_step_tokens());
    decode_items(items, members, budget);
    if (items.empty()) return;
    const Status st = engine_.step(items);
    ++steps_;
    ++steps_between_layers_;
    if (items.size() > 1) batched_tokens_ += items.size();
    finish_step(members, st);
    // their tokens now, as the worker's loop would take them after a step of its own
    for (Slot* slot : members) take_pending_token(*slot);
    publish_board(false);
}

// Between a pass's layers: a decoding job whose logits are ready takes its next token now (the
// worker's loop does the same between its own steps); a failure fails that job alone.
void EngineWorker::take_pending_token(Slot& slot) {
    if (!slot.job || !slot.decoding || slot.next_token >= 0) return;
    try {
        produce_token(slot, slot.session->logits());
    } catch (const std::exception& e) {
        spdlog::error("job {}: {}", slot.job->id, e.what());
        fail(slot, FailureKind::Internal, e.what());
    }
}

// After a step over `members`: the decoding ones have their logits (drafts verified), the prompt
// one its chunk; a prompt that is in starts decoding.
void EngineWorker::finish_step(const std::vector<Slot*>& members, const Status& st) {
    if (!st.ok()) {
        // A failed step (a weight read) leaves no member's state advanced: all of them fail.
        spdlog::error("engine step of {} jobs failed: {}", members.size(), st.message);
        for (Slot* slot : members) finish_failed(*slot, st);
        return;
    }
    for (Slot* slot : members) {
        if (slot->decoding) {
            if (slot->drafts > 0)
                verify_drafts(*slot);
            else
                slot->next_token = -1;
            continue;
        }
        slot->session->prompt_chunk_done();
        if (options_.live && slot->choice == 0)
            options_.live->prompt_chunk_done(slot->job->id, int(slot->session->tokens().size()));
        if (slot->session->prompt_pending() > 0) continue;
        if (slot->abandoned_at) {
            finish_abandoned(*slot);
            continue;
        }
        slot->decoding = true;
        slot->decode_start = slot->last_token_at = Clock::now();
        if (slot->choice == 0) {
            metrics_.add_prompt_tokens(slot->usage.prompt_tokens, slot->usage.cached_tokens,
                                       seconds_since(slot->admitted_at));
            if (options_.live)
                options_.live->prefilled(slot->job->id, slot->usage.cached_tokens, seconds_since(slot->admitted_at),
                                         engine_.stats());
        }
        if (slot->job->params.max_tokens == 0) finish_ok(*slot);
    }
}

// After a step that evaluated [next_token, d1..dk] with every row's logits: produces tokens
// from the rows in order, as plain decoding would from the same logits (same sampler, one draw
// per token), while each produced token equals the draft the next row was computed for. The
// first token that differs (or the one after the last draft) is the next token to evaluate;
// the state is cut back to the tokens whose logits were used. So the output is exactly that of
// plain decoding, greedy or sampled (a deterministic drafter: accepting a draft with
// probability p(d) and resampling from the residual is sampling from p and comparing).
void EngineWorker::verify_drafts(Slot& slot) {
    Session& session = *slot.session;
    const size_t rows = slot.step_tokens.size(), start = session.tokens().size() - rows;
    const size_t drafts = slot.drafts;
    size_t accepted = 0;
    for (size_t i = 0; i < rows; ++i) {
        if (!produce_token(slot, session.step_logits(i))) break;  // finished (slot released)
        if (i < drafts && slot.next_token == slot.step_tokens[i + 1]) {
            ++accepted;
            continue;
        }
        const Status st = session.truncate(start + 1 + i);
        if (!st.ok()) {
            finish_failed(slot, st);
            break;
        }
        break;
    }
    drafted_ += drafts;
    accepted_ += accepted;
    if (slot.job) slot.horizon->observe(int(drafts), int(accepted));
}

void EngineWorker::finish_ok(Slot& slot) {
    Job& job = *slot.job;
    metrics_.add_generated_tokens(slot.generated, seconds_since(slot.decode_start));
    const bool last_choice = slot.choice + 1 >= std::max(1, job.params.n);
    // What the decoder and the stop matcher still hold (unless a stop string ended the text)
    // joins the last token's text in the Done event.
    JobEvent done = std::move(slot.last);
    if (!slot.stop->stopped()) {
        auto rest = slot.decoder->flush();
        take_tool_calls(job, rest, done, slot.tool_calls_malformed);
        done.reasoning += rest.reasoning;
        done.content += slot.stop->push(rest.content);
        done.content += slot.stop->flush();
    }
    done.kind = JobEvent::Kind::Done;
    done.choice = slot.choice;
    done.last_choice = last_choice;
    // A turn that ended after well-formed calls finished by calling tools.
    if (slot.finish_reason == FinishReason::Stop && slot.decoder->tool_calls() > 0 && !slot.tool_calls_malformed)
        slot.finish_reason = FinishReason::ToolCalls;
    done.finish_reason = slot.finish_reason;
    done.stop_sequence = slot.stop->matched();
    done.usage = reported_usage_of(slot.usage, slot.job->uncounted_prompt_tokens);
    if (last_choice) {
        metrics_.count_request(RequestOutcome::Ok);
        Session& session = *slot.session;
        retire(slot, std::move(done));
        // A later request that continues this conversation resumes here (after the response:
        // the disk tier writes it through). /slots shows the entry from here on.
        session.remember();
        publish_board(true);
        return;
    }
    emit(job, std::move(done));
    slot.session->remember();
    // n > 1: the next choice is a separate sequence from the same prompt, resumed from the
    // prompt cache (the prompt is evaluated once).
    int reused = 0;
    const Status st = slot.session->begin_prompt(job.prompt, &reused);
    if (!st.ok()) {
        finish_failed(slot, st);
        return;
    }
    start_choice(slot, slot.choice + 1);
    if (slot.decoding && job.params.max_tokens == 0) finish_ok(slot);
}

// Per-choice state: sampler (seed + choice: distinct, reproducible draws), penalties, text
// decoding, stop strings, draft horizon. The session is at (or evaluating) the prompt.
void EngineWorker::start_choice(Slot& slot, int choice) {
    const GenerationParams& p = slot.job->params;
    slot.choice = choice;
    slot.generated = 0;
    NextTokenRules rules;
    rules.sampling = p.sampling;
    rules.sampling.seed += uint64_t(choice);
    rules.adjustments = p.adjustments;
    // Compiled by the HTTP thread that queued the job: compiling here would hold every other
    // stream (docs/performance.md "Compiling a schema").
    if (p.grammar && !p.compiled_grammar) throw Error(ErrorKind::Runtime, "the job's grammar was not compiled before it was queued");
    rules.grammar = p.compiled_grammar;
    if (!p.ignore_eos) rules.end_tokens.assign(end_ids_.begin(), end_ids_.end());
    rules.end_tokens.insert(rules.end_tokens.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());
    slot.next.emplace(rules);
    slot.decoder.emplace(tokenizer_, p);
    slot.stop.emplace(p.stop);
    slot.horizon.emplace(options_.draft_max);
    slot.finish_reason = FinishReason::Length;
    slot.last = JobEvent{};
    slot.tool_calls_malformed = false;
    slot.next_token = -1;
    slot.decoding = slot.session->prompt_pending() == 0;
    if (slot.decoding) slot.decode_start = slot.last_token_at = Clock::now();
}

void EngineWorker::finish_failed(Slot& slot, const Status& st) {
    switch (st.code) {
        case StatusCode::Cancelled: finish_cancelled(slot); break;
        case StatusCode::ContextFull: fail(slot, FailureKind::ContextFull, st.message); break;
        case StatusCode::InvalidArgument: fail(slot, FailureKind::InvalidPrompt, st.message); break;
        case StatusCode::Unavailable:
            // The model is unhealthy until restart (/health 503 names the rank).
            spdlog::error("job {}: {}", slot.job->id, st.message);
            if (options_.on_io_error) options_.on_io_error(st.message);
            fail(slot, FailureKind::ModelUnavailable, st.message);
            break;
        default:
            spdlog::error("job {}: engine failed: {}", slot.job->id, st.message);
            if (st.code == StatusCode::IoError && options_.on_io_error) options_.on_io_error(st.message);
            fail(slot, FailureKind::EngineFailed, st.message);
    }
}

// Whichever way the job ended: the status page, /slots, the gauges and busy() stop showing it
// first, and only then does its last event go out, so that a client reading /v1/status or
// /slots after the response (or after its error) never sees the request still running.
void EngineWorker::retire(Slot& slot, std::optional<JobEvent> last) {
    const std::shared_ptr<Job> job = std::move(slot.job);
    if (options_.live) options_.live->end(job->id);
    {
        std::lock_guard lock(current_mutex_);
        std::erase(current_, job);
    }
    slot.decoding = false;
    slot.next_token = -1;
    ++jobs_finished_;
    const int active = int(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s->job != nullptr; }));
    busy_ = active > 0;
    metrics_.set_processing(active);
    publish_board(true);
    if (last) emit(*job, std::move(*last));
}

void EngineWorker::publish_board(bool force) {
    const auto now = Clock::now();
    if (!force && now - last_board_ < kBoardInterval) return;
    last_board_ = now;
    const EngineStats stats = engine_.stats();
    metrics_.set_engine_stats(stats);
    if (!options_.board) return;
    SlotBoardView v;
    for (const auto& slot : slots_) {
        SlotView s;
        s.slot = slot->index;
        if (slot->job) {
            s.job_id = slot->job->id;
            s.phase = slot->decoding ? "decode" : "prefill";
            s.prompt_tokens = slot->usage.prompt_tokens;
            s.cached_tokens = slot->usage.cached_tokens;
            s.prompt_evaluated = int(std::min(slot->session->tokens().size(), slot->job->prompt.size()));
            s.generated_tokens = slot->usage.completion_tokens;
            s.max_tokens = slot->job->params.max_tokens;
            s.seconds = seconds_since(slot->admitted_at);
        } else {
            s.phase = "idle";
        }
        v.slots.push_back(s);
    }
    v.queued = int(queue_.size());
    v.steps = steps_;
    v.batched_tokens = batched_tokens_;
    v.steps_between_layers = steps_between_layers_;
    v.drafted = drafted_;
    v.accepted = accepted_;
    v.prompt_cache = engine_.prompt_cache_entries();
    v.engine = stats;
    options_.board->publish(std::move(v));
}

bool EngineWorker::emit(Job& job, JobEvent event) {
    // Never waits (docs/operations.md, "A client that stops reading"). Closed: the reader is
    // gone and the event is dropped; over the budget: this client is not taking its output, so
    // its job alone is cancelled.
    if (job.channel->push(std::move(event), options_.client_buffer_bytes) != JobChannel::PushResult::OverBudget)
        return true;
    if (job.cancel_reason.load() == CancelReason::None) {
        metrics_.count_slow_client();
        spdlog::warn("job {}: cancelled: its client took none of the last {} KiB of output (--client-buffer-kb)",
                     job.id, options_.client_buffer_bytes / 1024);
    }
    job.request_cancel(CancelReason::SlowClient);
    return false;
}

void EngineWorker::fail(Slot& slot, FailureKind kind, const std::string& message) {
    metrics_.count_request(outcome_of(kind));
    JobEvent event = failure_event(kind, message, reported_usage_of(slot.usage, slot.job->uncounted_prompt_tokens));
    retire(slot, std::move(event));
}

void EngineWorker::finish_cancelled(Slot& slot) {
    switch (slot.job->cancel_reason.load()) {
        case CancelReason::Deadline:
            fail(slot, FailureKind::Deadline, "the request did not finish within its deadline (--deadline-s)");
            return;
        case CancelReason::Shutdown: fail(slot, FailureKind::ShuttingDown, "the server is shutting down"); return;
        default:  // the client left or could not keep up: nobody is listening any more
            fail(slot, FailureKind::Cancelled, "request cancelled");
    }
}

// A prompt whose client left (docs/agents.md, "No prefill paid twice"): its chunks go on into the
// prompt cache, for the retry that comes back for it, for at most --abandoned-prefill-s after the
// client left. True while it goes on; false when the job is to end as cancelled (it is not
// abandonable, or its time is up).
bool EngineWorker::read_on_abandoned(Slot& slot) {
    Job& job = *slot.job;
    if (job.stop_prefill.load() || job.cancel_reason.load() != CancelReason::ClientGone) return false;
    if (options_.abandoned_prefill_s <= 0) {
        job.stop_prefill.store(true);
        return false;
    }
    const auto now = Clock::now();
    if (!slot.abandoned_at) {
        slot.abandoned_at = now;
        if (options_.live) options_.live->abandoned(job.id);
        spdlog::info("job {}: its client left at {} of {} prompt tokens; the prompt is read on into the prompt cache "
                     "(--abandoned-prefill-s {:g})", job.id, slot.session->tokens().size(), job.prompt.size(),
                     options_.abandoned_prefill_s);
    }
    if (std::chrono::duration<double>(now - *slot.abandoned_at).count() <= options_.abandoned_prefill_s) return true;
    spdlog::info("job {}: abandoned prompt stopped after --abandoned-prefill-s at {} of {} tokens", job.id,
                 slot.session->tokens().size(), job.prompt.size());
    job.stop_prefill.store(true);
    return false;
}

// An abandoned prompt read to its end: its state goes into the prompt cache, and the job ends as
// the cancelled request it was.
void EngineWorker::finish_abandoned(Slot& slot) {
    spdlog::info("job {}: abandoned prompt read to its end ({} tokens), kept in the prompt cache", slot.job->id,
                 slot.job->prompt.size());
    metrics_.add_prompt_tokens(slot.usage.prompt_tokens, slot.usage.cached_tokens, seconds_since(slot.admitted_at));
    slot.session->remember();
    finish_cancelled(slot);
}

// A request for the same prompt (its client's retry) takes over an abandoned prefill where it
// is: what was read counts as its cached tokens, and the prompt reads on for it. The abandoned
// job ends as cancelled.
void EngineWorker::join_abandoned(Slot& slot, std::shared_ptr<Job> job) {
    const std::shared_ptr<Job> left = std::move(slot.job);
    if (options_.live) options_.live->end(left->id);
    metrics_.count_request(RequestOutcome::Cancelled);
    const int read = int(std::min(slot.session->tokens().size(), job->prompt.size()));
    spdlog::info("job {}: joins abandoned job {} at {} of {} prompt tokens", job->id, left->id, read, job->prompt.size());
    slot.job = std::move(job);
    {
        std::lock_guard lock(current_mutex_);
        std::erase(current_, left);
        current_.push_back(slot.job);
    }
    slot.abandoned_at.reset();
    slot.admitted_at = Clock::now();
    slot.usage = Usage{};
    slot.usage.prompt_tokens = int(slot.job->prompt.size());
    slot.usage.cached_tokens = read;
    slot.job->prompt_cached.store(read);
    if (options_.live) {
        options_.live->begin(*slot.job, engine_.stats());
        options_.live->prompt_begun(slot.job->id, read);
    }
    start_choice(slot, 0);
    publish_board(true);
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

}  // namespace k3::server
