#include "routes/generation_route.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "anthropic/messages.h"
#include "http/connection_probe.h"
#include "wire/json_body.h"
#include "openai/request.h"
#include "openai/response.h"
#include "responses/responses.h"
#include "routes/request_gate.h"
#include "routes/route_reply.h"

namespace k3::server {

std::unique_ptr<Responder> make_responder(const GenerationRequest& request, const std::string& model_fingerprint) {
    if (request.endpoint == Endpoint::Responses) return make_responses_responder(request);
    if (request.endpoint == Endpoint::Messages) return make_messages_responder(request);
    return make_openai_responder(request, model_fingerprint);
}

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(50);

// Everything one generation request needs while it streams: the job, the Responder that shapes
// what the client sees, and the events received before streaming began.
}  // namespace

struct Exchange {
    std::shared_ptr<Job> job;
    std::unique_ptr<Responder> responder;
    ConnectionProbe probe;
    std::optional<Clock::time_point> deadline;
    std::vector<JobEvent> pending;    // received before streaming began

    Exchange(std::shared_ptr<Job> j, std::unique_ptr<Responder> r, const HttpRequest& req,
             std::optional<Clock::time_point> until)
        : job(std::move(j)), responder(std::move(r)), probe(req.remote_addr, req.remote_port, req.local_port),
          deadline(until) {}

    // Tells the Responder the prompt's figures once the worker has begun it.
    void tell_prompt_begun() {
        if (told_begun) return;
        const int cached = job->prompt_cached.load();
        if (cached < 0) return;
        responder->prompt_begun(int(job->prompt.size()), cached);
        told_begun = true;
    }
    bool told_begun = false;

    // The client left, or the deadline passed: tell the worker, which answers either way (504
    // for the deadline). The one place the deadline is checked: this thread polls every
    // kPollInterval while the job is queued, reads its prompt or generates, and the engine
    // stops a step between layers once the flag is up.
    bool check_client() {
        if (probe.gone()) {
            job->request_cancel(CancelReason::ClientGone);
            return false;
        }
        if (deadline && Clock::now() >= *deadline) job->request_cancel(CancelReason::Deadline);
        return true;
    }
};

void GenerationRoute::generate(const HttpRequest& req, HttpResponse& res, Endpoint endpoint) {
    if (state_.phase.load() == Phase::Draining) {
        state_.metrics.count_request(RequestOutcome::RejectedShutdown);
        throw shutting_down_error();
    }
    const JsonBody body = parse_json_body(req.body, json_limits(state_));
    GenerationRequest g;
    IgnoredFields ignored;
    // The request's grammar, if it has one, is compiled while it is parsed, on this thread,
    // within one time budget counted from here (--grammar-max-compile-ms).
    ModelLimits limits = state_.limits;
    limits.grammar.started = Clock::now();
    try {
        IgnoredFieldsScope scope(ignored);
        switch (endpoint) {
            case Endpoint::Completions:
                g = parse_completion_request(body.value, *state_.tokenizer, limits, &body.schemas);
                break;
            case Endpoint::ChatCompletions:
                g = parse_chat_request(body.value, *state_.tokenizer, limits, &body.schemas);
                break;
            case Endpoint::Responses:
                g = parse_responses_request(body.value, *state_.tokenizer, limits, &body.schemas);
                break;
            case Endpoint::Messages: g = parse_messages_request(body.value, *state_.tokenizer, limits); break;
        }
    } catch (const GrammarRefusal& e) {
        state_.metrics.count_grammar_refusal(e.limit);
        throw;
    }
    check_answer_fits(g, state_.limits.answer);
    compile_grammar(g.params, limits.grammar);
    report_tolerance(req, res, g, ignored);
    std::unique_ptr<Responder> responder = make_responder(g, state_.info.fingerprint);
    auto job = std::make_shared<Job>();
    job->id = state_.next_job_id++;
    job->prompt = std::move(g.prompt);
    job->images = std::move(g.images);
    job->uncounted_prompt_tokens = g.uncounted_prompt_tokens;
    job->params = std::move(g.params);
    job->cache_partition = prompt_cache_partition(config(), req);
    job->finish_abandoned_prefill = config().abandoned_prefill_s > 0;
    std::optional<Clock::time_point> deadline;
    if (config().deadline_s > 0)
        deadline = job->enqueued_at + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(config().deadline_s));
    auto ex = std::make_shared<Exchange>(job, std::move(responder), req, deadline);

    switch (state_.queue.push(job)) {
        case JobQueue::PushResult::Ok: break;
        case JobQueue::PushResult::Full:
            state_.metrics.count_request(RequestOutcome::RejectedFull);
            throw queue_full_error(state_.queue.capacity());
        case JobQueue::PushResult::Closed:
            state_.metrics.count_request(RequestOutcome::RejectedShutdown);
            throw shutting_down_error();
    }
    if (g.stream)
        stream(req, ex, res);
    else
        respond_whole(req, ex, res);
}

// The job's grammar is compiled here, before the job is queued: its automaton's start and first
// mask, the costly part for a large schema, within the request's budgets (one time budget with
// the rules, made while parsing). The worker only runs it, so no request's grammar slows the
// other streams (compiled on the worker, an enum of 60,000 strings held them all for 26-44 s:
// docs/performance.md "Compiling a schema"). /metrics shows compiles in progress; the hook holds one open while
// the file --test-hold-grammar-compile names exists (docs/development.md).
void GenerationRoute::compile_grammar(GenerationParams& params, const GrammarLimits& limits) {
    if (!params.grammar) return;
    const auto started = Clock::now();
    state_.metrics.grammar_compile_started();
    struct Ended {
        Metrics& metrics;
        Clock::time_point started;
        ~Ended() { metrics.grammar_compile_ended(std::chrono::duration<double>(Clock::now() - started).count()); }
    } ended{state_.metrics, started};
    try {
        params.compiled_grammar = std::make_shared<GrammarMatcher>(*params.grammar, state_.token_table, limits);
    } catch (const GrammarBudgetError& e) {
        state_.metrics.count_grammar_refusal(e.limit());
        throw GrammarRefusal(params.tool_choice == ToolChoice::Required ? "tools" : "response_format", e);
    }
    std::error_code ec;
    const std::string& hold = config().test_hold_grammar_compile;
    while (!hold.empty() && std::filesystem::exists(hold, ec))
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

// What the tolerance policy did to this request (wire/fields.h), told to the operator (the
// log, /metrics) and to the client (response headers).
void GenerationRoute::report_tolerance(const HttpRequest& req, HttpResponse& res,
                                       const GenerationRequest& g, const IgnoredFields& ignored) {
    state_.metrics.count_ignored(ignored.fields.size(), ignored.tools.size());
    auto joined = [](const std::vector<std::string>& v) {
        std::string out;
        for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
        return out;
    };
    if (!ignored.fields.empty()) spdlog::debug("{} {}: ignored unknown fields: {}", req.method, req.path, joined(ignored.fields));
    if (!ignored.tools.empty()) {
        spdlog::info("{} {}: left out tools this server cannot run: {}", req.method, req.path, joined(ignored.tools));
        res.add_header("X-K3-Ignored-Tools", joined(ignored.tools));
    }
    if (!g.clamp.param.empty()) {
        state_.metrics.count_max_tokens_clamped();
        spdlog::info("{} {}: {} {} lowered to {}, what the context leaves", req.method, req.path, g.clamp.param,
                     g.clamp.asked, g.clamp.granted);
        res.add_header("X-K3-Max-Tokens-Clamped",
                       g.clamp.param + "=" + std::to_string(g.clamp.asked) + "; granted=" + std::to_string(g.clamp.granted));
    }
}

// Non-streaming: collect everything, answer once. A client that leaves cancels the job.
void GenerationRoute::respond_whole(const HttpRequest& req, const std::shared_ptr<Exchange>& ex, HttpResponse& res) {
    // counted like a stream, so a shutdown waits for this answer too
    ++state_.open_streams;
    struct Closed {
        std::atomic<int>& n;
        ~Closed() { --n; }
    } closed{state_.open_streams};
    for (;;) {
        for (auto& e : ex->job->channel->pop_all(kPollInterval)) {
            if (e.kind == JobEvent::Kind::Error) {
                ex->job->channel->close();
                send_error(req, res, api_error(e.failure));
                return;
            }
            ex->responder->collect(e);
            if (e.ends_job()) {
                ex->job->channel->close();
                // The body's text is moved, not copied (send_json would dump a json tree):
                // the answer's peak stays near twice its size (openai/choices_responder.h).
                res.status = 200;
                res.body = ex->responder->whole_body();
                res.add_header("Content-Type", "application/json");
                return;
            }
        }
        if (!ex->check_client()) {
            ex->job->channel->close();
            res.status = 499;  // nobody reads it
            return;
        }
    }
}

// Streaming: wait briefly for the first event so that an early error is a plain HTTP error;
// after that (or after the first ping interval) commit to 200 + SSE.
void GenerationRoute::stream(const HttpRequest& req, const std::shared_ptr<Exchange>& ex, HttpResponse& res) {
    // Counted from here (not from the commit), so a shutdown that cancels the job before its
    // first event still waits for this handler to answer.
    ++state_.open_streams;
    auto commit_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(config().sse_ping_s));
    while (ex->pending.empty() && Clock::now() < commit_at) {
        ex->pending = ex->job->channel->pop_all(kPollInterval);
        if (!ex->check_client()) {
            ex->job->channel->close();
            res.status = 499;
            --state_.open_streams;
            return;
        }
    }
    if (!ex->pending.empty() && ex->pending.front().kind == JobEvent::Kind::Error) {
        ex->job->channel->close();
        send_error(req, res, api_error(ex->pending.front().failure));
        --state_.open_streams;
        return;
    }
    res.add_header("Cache-Control", "no-cache");
    res.add_header("X-Accel-Buffering", "no");
    double ping_s = config().sse_ping_s;
    res.stream(
        "text/event-stream",
        [ex, ping_s](StreamSink& sink) {
            auto last_write = Clock::now();
            auto write = [&](const std::string& s) {
                if (s.empty()) return true;
                last_write = Clock::now();
                return sink.write(s.data(), s.size());
            };
            ex->tell_prompt_begun();
            bool ok = write(ex->responder->stream_start());
            while (ok) {
                std::vector<JobEvent> events = std::move(ex->pending);
                ex->pending.clear();
                if (events.empty()) events = ex->job->channel->pop_all(kPollInterval);
                for (const auto& e : events) {
                    if (e.kind == JobEvent::Kind::Error) {
                        write(ex->responder->stream_error(api_error(e.failure)));
                        sink.done();
                        return true;
                    }
                    ok = ok && write(ex->responder->stream_event(e));
                    if (e.ends_job()) {
                        if (ok) sink.done();
                        return ok;
                    }
                }
                // Nothing written for --sse-ping-s (queued, reading the prompt, or between two
                // slow tokens): a keep-alive the client's SDK passes on (docs/agents.md).
                if (ok && std::chrono::duration<double>(Clock::now() - last_write).count() >= ping_s) {
                    ex->tell_prompt_begun();
                    ok = write(ex->responder->keep_alive());
                }
                if (ok && !ex->check_client()) ok = false;
            }
            ex->job->request_cancel(CancelReason::ClientGone);
            return false;
        },
        [ex, this](bool success) {
            if (!success) ex->job->request_cancel(CancelReason::ClientGone);
            ex->job->channel->close();
            --state_.open_streams;
        });
}

}  // namespace k3::server
