// `k3serve serve`: start order, signals and shutdown of the daemon (docs/operations.md "The
// daemon" and "Exit codes"), as the named steps serve_main takes:
//   1. read_config (bad flag/config -> exit 2), setup_logging;
//   2. take_signals: SIGINT/SIGTERM blocked in every thread and taken on one signal thread;
//      lock_memory (--mlock);
//   3. open_ports: bind HTTP and serve at once: /health and the UI answer, everything else 503
//      "loading";
//   4. load_model: tokenizer and engine (STATUS= to systemd), log_model;
//   5. the engine worker (worker_options) and the liveness monitor (make_liveness), READY=1,
//      watch_background_load;
//   6. first signal: drain: stop taking jobs, drain for --drain-timeout-s, cancel the rest,
//      exit 0; a second signal exits at once with 130.
#include "serve.h"

#include <signal.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <optional>
#include <thread>

#include "settings/daemon_config.h"
#include "load_figures.h"
#include "ops/agent_port.h"
#include "routes.h"
#include "k3/error.h"
#include "k3/tokenizer.h"
#include "ops/memory_lock.h"
#include "routes/server_state.h"
#include "ops/systemd_notify.h"
#include "worker/worker.h"

namespace k3::server {

namespace {

// %j in a log pattern: the message as a JSON string body (quotes, backslashes, control bytes
// escaped), so that --log-format json writes one valid JSON object per line.
class JsonEscapedMessage : public spdlog::custom_flag_formatter {
public:
    void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
        for (char c : msg.payload) {
            switch (c) {
                case '"': dest.append(std::string_view("\\\"")); break;
                case '\\': dest.append(std::string_view("\\\\")); break;
                case '\n': dest.append(std::string_view("\\n")); break;
                case '\t': dest.append(std::string_view("\\t")); break;
                case '\r': dest.append(std::string_view("\\r")); break;
                default:
                    if (static_cast<unsigned char>(c) < 0x20) {
                        char buf[8];
                        std::snprintf(buf, sizeof buf, "\\u%04x", c);
                        dest.append(std::string_view(buf));
                    } else {
                        dest.push_back(c);
                    }
            }
        }
    }
    std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonEscapedMessage>(); }
};

void setup_logging(const DaemonConfig& config) {
    auto logger = std::make_shared<spdlog::logger>("k3serve", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    if (config.log_format == "json") {
        auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
        formatter->add_flag<JsonEscapedMessage>('j').set_pattern(
            R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","msg":"%j"})");
        logger->set_formatter(std::move(formatter));
    } else {
        logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %l %v");
    }
    logger->set_level(spdlog::level::from_str(config.log_level));
    logger->flush_on(spdlog::level::trace);
    spdlog::set_default_logger(logger);
}

// Signals arrive on one thread (sigwait) and only set a flag; the main thread does the work.
struct ShutdownSignal {
    std::mutex mutex;
    std::condition_variable cv;
    int count = 0;

    void wait() {
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return count > 0; });
    }
    bool requested() {
        std::lock_guard lock(mutex);
        return count > 0;
    }
};

void start_signal_thread(ShutdownSignal& shutdown, const sigset_t& set) {
    std::thread([&shutdown, set] {
        for (;;) {
            int sig = 0;
            if (sigwait(&set, &sig) != 0) continue;
            std::lock_guard lock(shutdown.mutex);
            if (++shutdown.count >= 2) {
                static const char msg[] = "k3serve: second signal, exiting now\n";
                ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
                (void)ignored;
                _exit(130);
            }
            spdlog::info("received {}, shutting down (a second signal exits at once)", strsignal(sig));
            shutdown.cv.notify_all();
        }
    }).detach();
}

ModelLimits model_limits(const DaemonConfig& config, const ModelInfo& info) {
    ModelLimits limits;
    limits.model_name = config.model_alias;
    limits.strict_model_name = config.strict_model_name;
    limits.hosted_sampling = config.hosted_sampling;
    limits.new_turn_tool_required = config.new_turn_tool_choice == "required";
    limits.n_vocab = info.n_vocab;
    limits.images.vision = info.vision;
    limits.images.per_image.max_bytes = config.image_max_bytes;
    limits.images.per_image.max_pixels = config.image_max_pixels;
    limits.images.max_images = config.images_per_request;
    limits.grammar = config.grammar_limits();
    if (config.n_ctx > info.n_ctx_max)
        throw Error(ErrorKind::Usage, "--n-ctx " + std::to_string(config.n_ctx) + " exceeds the model's maximum context of " +
                                          std::to_string(info.n_ctx_max) + " tokens");
    limits.n_ctx = config.n_ctx > 0 ? config.n_ctx : std::min(info.n_ctx_max, 32768);
    limits.max_prompt_tokens = limits.n_ctx - 1;
    if (config.max_prompt_tokens > 0) limits.max_prompt_tokens = std::min(limits.max_prompt_tokens, config.max_prompt_tokens);
    return limits;
}

// Step 1: the config. Returns the exit code when serve ends here (--help: 0; a bad flag or
// config file: its kind's code), else nothing.
std::optional<int> read_config(int argc, char** argv, DaemonConfig& config) {
    try {
        bool help = false;
        config = parse_daemon_config(argc, argv, &help);
        if (help) {
            std::fputs(serve_usage().c_str(), stdout);
            return 0;
        }
    } catch (const Error& e) {
        std::fprintf(stderr, "k3serve serve: %s\n", e.what());
        return exit_code_for(e.kind());
    }
    return std::nullopt;
}

// Step 2: SIGINT and SIGTERM blocked in every thread (so this runs before any thread exists:
// threads inherit the mask) and taken on the signal thread. A client that hangs up is a failed
// write, not a dead daemon (SIGPIPE ignored).
void take_signals(ShutdownSignal& shutdown) {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    signal(SIGPIPE, SIG_IGN);
    start_signal_thread(shutdown, signals);
}

// Step 2: --mlock, before anything large is mapped or allocated (MCL_FUTURE covers what comes
// after).
void lock_memory(const DaemonConfig& config) {
    if (!config.mlock) return;
    const MemoryLock lock = lock_process_memory();
    if (lock.locked) spdlog::info("{}", lock.detail);
    else spdlog::warn("{}", lock.detail);
}

// Step 3: the HTTP port and the agent port, answering at once (/health and the UI; the API
// 503 "loading"; the agent port "drain" until the model is loaded, then the load weight).
// Returns the HTTP port; throws k3::Error when a port cannot be bound (HTTP stopped again).
int open_ports(const DaemonConfig& config, Router& http, AgentPort& agent) {
    const int port = http.bind(config.host, config.port);
    http.start();
    spdlog::info("listening on http://{}:{} (API answers 503 until the model is loaded)", config.host, port);
    if (config.agent_port >= 0) {
        try {
            const int agent_port = agent.start(config.host, config.agent_port);
            spdlog::info("agent-check: listening on {}:{}", config.host, agent_port);
        } catch (const Error&) {
            http.stop();
            throw;
        }
    }
    return port;
}

// What step 4 loads, owned by serve_main and lent to the routes through ServerState.
struct LoadedModel {
    std::unique_ptr<Tokenizer> tokenizer;
    std::unique_ptr<Engine> engine;
};

// Step 4: the tokenizer and the engine (progress to /v1/status and systemd's STATUS=), then
// the limits the routes check. Throws what the load throws.
LoadedModel load_model(const DaemonConfig& config, ServerState& state) {
    LoadedModel m;
    notify_status("loading tokenizer");
    state.set_status("loading tokenizer");
    m.tokenizer = Tokenizer::load(config.model_dir);
    notify_status("loading model");
    m.engine = Engine::load(config.engine_options(), [&](const std::string& line) {
        spdlog::info("load: {}", line);
        state.set_status(line);
        notify_status("loading: " + line);
    });
    state.info = m.engine->info();
    state.engine = m.engine.get();
    state.limits = model_limits(config, state.info);
    state.limits.answer = answer_limit(*m.tokenizer, config.max_answer_mb);
    state.tokenizer = m.tokenizer.get();
    return m;
}

void log_model(const DaemonConfig& config, const ServerState& state) {
    const ModelInfo& info = state.info;
    spdlog::info("model: {} ({})", info.name, info.shape);
    spdlog::info("kernels: {}", info.kernels);
    spdlog::info("memory plan: {}", info.memory_plan);
    spdlog::info("context: {} tokens (prompt at most {}), compute threads {}, parallel {}, queue depth {}",
                 state.limits.n_ctx, state.limits.max_prompt_tokens, config.threads, config.parallel, config.queue_depth);
    spdlog::info("whole answers at most {} MiB (--max-answer-mb; the vocabulary's longest token is {} bytes in a JSON "
                 "string, {} as a logprobs bytes array)",
                 config.max_answer_mb, state.limits.answer.piece, state.limits.answer.piece_bytes);
}

// Step 5: the worker's options. It reports progress and I/O errors to the liveness monitor
// (once `liveness` holds it), which watches the engine's progress counter too and feeds
// systemd's watchdog while things move.
WorkerOptions worker_options(const DaemonConfig& config, ServerState& state, const std::unique_ptr<Liveness>& liveness) {
    WorkerOptions o;
    o.n_ctx = state.limits.n_ctx;
    o.parallel = config.parallel;
    o.draft_max = config.draft_max;
    o.board = &state.board;
    o.client_buffer_bytes = size_t(config.client_buffer_kb) * 1024;
    o.abandoned_prefill_s = config.abandoned_prefill_s;
    o.interleave_tokens = size_t(config.interleave_tokens);
    o.decode_wait_s = config.decode_wait_s;
    o.hold_prefill_file = config.test_hold_prefill;
    o.heartbeat = [&liveness] {
        if (liveness) liveness->beat();
    };
    o.on_io_error = [&liveness](const std::string& why) {
        if (liveness) liveness->mark_unhealthy(why);
    };
    o.live = &state.live;
    return o;
}

// Step 5: the liveness monitor over the worker and the engine.
std::unique_ptr<Liveness> make_liveness(const DaemonConfig& config, EngineWorker& worker, Engine& engine) {
    LivenessOptions options;
    options.stuck_after_s = config.stuck_after_s;
    auto liveness = std::make_unique<Liveness>([&worker] { return worker.busy(); },
                                               [&engine] { return engine.progress(); }, options);
    if (liveness->watchdog_enabled()) spdlog::info("systemd watchdog on: pinging while the engine makes progress");
    return liveness;
}

// After ready, while the routed experts load in the background: one line when they are all in
// (or the load failed), from a thread of its own that looks every 50 ms and ends at shutdown.
// Not joinable when everything was read before ready.
std::thread watch_background_load(ServerState& state, ShutdownSignal& shutdown, const Engine& engine) {
    const WeightsLoad w = engine.weights_load();
    if (w.complete()) return {};
    spdlog::info("routed experts loading in the background ({:.2f} of {:.2f} GB read); requests are answered meanwhile",
                 double(w.loaded_bytes) / 1e9, double(w.total_bytes) / 1e9);
    return std::thread([&state, &shutdown] {
        const auto t0 = Clock::now();
        for (;;) {
            if (shutdown.requested()) return;
            WeightsLoad now = state.weights_load();
            if (now.failures > 0) {
                spdlog::error("loading the routed experts failed: {} (requests that need them fail; restart the daemon)",
                              now.first_failure);
                return;
            }
            if (now.complete()) {
                spdlog::info("every routed expert is loaded ({:.2f} GB, {:.2f} s after ready)", double(now.total_bytes) / 1e9,
                             std::chrono::duration<double>(Clock::now() - t0).count());
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
}

// Step 6: refuse new work, let what is queued and running finish for --drain-timeout-s, then
// cancel the rest; stop the worker and the monitor, and give the HTTP threads up to 2 s to
// write the last events of their streams.
void drain(const DaemonConfig& config, ServerState& state, EngineWorker& worker, Liveness& liveness) {
    state.phase = Phase::Draining;
    notify_stopping();
    state.queue.close();
    auto drain_until = Clock::now() + std::chrono::milliseconds(long(config.drain_timeout_s * 1000));
    while (Clock::now() < drain_until && (state.queue.size() > 0 || worker.busy()))
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (state.queue.size() > 0 || worker.busy()) {
        spdlog::warn("drain timeout ({} s) reached: cancelling {} queued and {} running request(s)",
                     config.drain_timeout_s, state.queue.size(), worker.busy() ? 1 : 0);
        state.queue.cancel_all(CancelReason::Shutdown);
        worker.cancel_current(CancelReason::Shutdown);
    }
    worker.join();
    state.live.set_layer_counter({}, 0);  // status reads from here on must not reach the engine
    liveness.stop();
    auto write_until = Clock::now() + std::chrono::seconds(2);
    while (state.open_streams.load() > 0 && Clock::now() < write_until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace

// The steps of the head comment, in order.
int serve_main(int argc, char** argv) {
    DaemonConfig config;
    if (std::optional<int> code = read_config(argc, argv, config)) return *code;
    setup_logging(config);

    ShutdownSignal shutdown;
    take_signals(shutdown);
    lock_memory(config);

    ServerState state(config);
    state.start_time = (long long)std::time(nullptr);
    spdlog::info("k3serve {} serve: effective config {}", K3_VERSION, dump(config.to_json()));

    Router http(state);
    AgentPort agent([&state] { return agent_reply(state); });
    int port = 0;
    try {
        port = open_ports(config, http, agent);
    } catch (const Error& e) {
        spdlog::error("{}", e.what());
        return exit_code_for(e.kind());
    }
    auto stop_listening = [&] {
        agent.stop();
        http.stop();
    };

    LoadedModel model;
    try {
        model = load_model(config, state);
    } catch (const Error& e) {
        spdlog::error("cannot serve {}: {}", config.model_dir, e.what());
        state.set_status(e.what());
        state.phase = Phase::Failed;
        stop_listening();
        return exit_code_for(e.kind());
    } catch (const std::exception& e) {
        spdlog::error("cannot serve {}: {}", config.model_dir, e.what());
        state.phase = Phase::Failed;
        stop_listening();
        return 1;
    }
    log_model(config, state);

    Engine& engine = *model.engine;
    std::unique_ptr<Liveness> liveness;
    state.live.set_layer_counter([&engine] { return engine.progress(); }, state.info.n_layers);
    EngineWorker worker(engine, *model.tokenizer, state.queue, state.metrics, worker_options(config, state, liveness));
    state.token_table = worker.token_table();
    liveness = make_liveness(config, worker, engine);
    state.liveness = liveness.get();
    liveness->start();
    worker.start();
    state.phase = Phase::Ready;
    state.set_status("ready");
    notify_ready("serving " + state.limits.model_name + " on " + config.host + ":" + std::to_string(port));
    spdlog::info("ready: serving '{}' at http://{}:{}", state.limits.model_name, config.host, port);
    std::thread load_watch = watch_background_load(state, shutdown, engine);

    shutdown.wait();
    if (load_watch.joinable()) load_watch.join();
    drain(config, state, worker, *liveness);
    stop_listening();
    spdlog::info("shut down cleanly ({} requests served)", state.metrics.requests(RequestOutcome::Ok));
    return 0;
}

}  // namespace k3::server
