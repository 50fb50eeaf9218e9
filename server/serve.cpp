// `k3serve serve`: start order, signals and shutdown of the daemon (house style 3.5, 3.6).
//   1. parse the config (bad flag/config -> exit 2), set up logging;
//   2. block SIGINT/SIGTERM in every thread and take them on one signal thread; lock memory
//      (--mlock);
//   3. bind HTTP and serve at once: /health and the UI answer, everything else 503 "loading";
//   4. load tokenizer and engine (STATUS= to systemd), start the engine worker, READY=1;
//   5. first signal: stop taking jobs, drain for --drain-timeout-s, cancel the rest, exit 0;
//      a second signal exits at once with 130.
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

}  // namespace

int serve_main(int argc, char** argv) {
    DaemonConfig config;
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
    setup_logging(config);

    // Before any thread exists, so that every thread inherits the mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a failed write, not a dead daemon
    ShutdownSignal shutdown;
    start_signal_thread(shutdown, signals);

    // Before anything large is mapped or allocated: MCL_FUTURE covers what comes after.
    if (config.mlock) {
        const MemoryLock lock = lock_process_memory();
        if (lock.locked) spdlog::info("{}", lock.detail);
        else spdlog::warn("{}", lock.detail);
    }

    ServerState state(config);
    state.start_time = (long long)std::time(nullptr);
    spdlog::info("k3serve {} serve: effective config {}", K3_VERSION, dump(config.to_json()));

    Router http(state);
    int port = 0;
    try {
        port = http.bind(config.host, config.port);
    } catch (const Error& e) {
        spdlog::error("{}", e.what());
        return exit_code_for(e.kind());
    }
    http.start();
    spdlog::info("listening on http://{}:{} (API answers 503 until the model is loaded)", config.host, port);
    // The agent port answers "drain" until the model is loaded, then the load weight.
    AgentPort agent([&state] { return agent_reply(state); });
    if (config.agent_port >= 0) {
        try {
            const int agent_port = agent.start(config.host, config.agent_port);
            spdlog::info("agent-check: listening on {}:{}", config.host, agent_port);
        } catch (const Error& e) {
            spdlog::error("{}", e.what());
            http.stop();
            return exit_code_for(e.kind());
        }
    }
    auto stop_http = [&] {
        agent.stop();
        http.stop();
    };

    std::unique_ptr<Tokenizer> tokenizer;
    std::unique_ptr<Engine> engine;
    try {
        notify_status("loading tokenizer");
        state.set_status("loading tokenizer");
        tokenizer = Tokenizer::load(config.model_dir);
        notify_status("loading model");
        engine = Engine::load(config.engine_options(), [&](const std::string& line) {
            spdlog::info("load: {}", line);
            state.set_status(line);
            notify_status("loading: " + line);
        });
        state.info = engine->info();
        state.engine = engine.get();
        state.limits = model_limits(config, state.info);
        state.limits.answer = answer_limit(*tokenizer, config.max_answer_mb);
        state.tokenizer = tokenizer.get();
    } catch (const Error& e) {
        spdlog::error("cannot serve {}: {}", config.model_dir, e.what());
        state.set_status(e.what());
        state.phase = Phase::Failed;
        stop_http();
        return exit_code_for(e.kind());
    } catch (const std::exception& e) {
        spdlog::error("cannot serve {}: {}", config.model_dir, e.what());
        state.phase = Phase::Failed;
        stop_http();
        return 1;
    }
    const ModelInfo& info = state.info;
    spdlog::info("model: {} ({})", info.name, info.shape);
    spdlog::info("kernels: {}", info.kernels);
    spdlog::info("memory plan: {}", info.memory_plan);
    spdlog::info("context: {} tokens (prompt at most {}), compute threads {}, parallel {}, queue depth {}",
                 state.limits.n_ctx, state.limits.max_prompt_tokens, config.threads, config.parallel, config.queue_depth);
    spdlog::info("whole answers at most {} MiB (--max-answer-mb; the vocabulary's longest token is {} bytes in a JSON "
                 "string, {} as a logprobs bytes array)",
                 config.max_answer_mb, state.limits.answer.piece, state.limits.answer.piece_bytes);

    // The worker reports progress and I/O errors to the liveness monitor, which watches the
    // engine's progress counter too and feeds systemd's watchdog while things move.
    std::unique_ptr<Liveness> liveness;
    WorkerOptions worker_options;
    worker_options.n_ctx = state.limits.n_ctx;
    worker_options.parallel = config.parallel;
    worker_options.draft_max = config.draft_max;
    worker_options.board = &state.board;
    worker_options.client_buffer_bytes = size_t(config.client_buffer_kb) * 1024;
    worker_options.abandoned_prefill_s = config.abandoned_prefill_s;
    worker_options.interleave_tokens = size_t(config.interleave_tokens);
    worker_options.hold_prefill_file = config.test_hold_prefill;
    worker_options.heartbeat = [&liveness] {
        if (liveness) liveness->beat();
    };
    worker_options.on_io_error = [&liveness](const std::string& why) {
        if (liveness) liveness->mark_unhealthy(why);
    };
    worker_options.live = &state.live;
    state.live.set_layer_counter([&engine] { return engine->progress(); }, info.n_layers);
    EngineWorker worker(*engine, *tokenizer, state.queue, state.metrics, worker_options);
    state.token_table = worker.token_table();
    LivenessOptions liveness_options;
    liveness_options.stuck_after_s = config.stuck_after_s;
    liveness = std::make_unique<Liveness>([&worker] { return worker.busy(); }, [&engine] { return engine->progress(); },
                                          liveness_options);
    if (liveness->watchdog_enabled()) spdlog::info("systemd watchdog on: pinging while the engine makes progress");
    state.liveness = liveness.get();
    liveness->start();
    worker.start();
    state.phase = Phase::Ready;
    state.set_status("ready");
    notify_ready("serving " + state.limits.model_name + " on " + config.host + ":" + std::to_string(port));
    spdlog::info("ready: serving '{}' at http://{}:{}", state.limits.model_name, config.host, port);
    std::thread load_watch;  // joined after shutdown is requested (it looks every 50 ms)
    if (WeightsLoad w = engine->weights_load(); !w.complete()) {
        spdlog::info("routed experts loading in the background ({:.2f} of {:.2f} GB read); requests are answered meanwhile",
                     double(w.loaded_bytes) / 1e9, double(w.total_bytes) / 1e9);
        // One line when they are all in (or the load failed), from a thread of its own.
        load_watch = std::thread([&state, &shutdown] {
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

    shutdown.wait();
    if (load_watch.joinable()) load_watch.join();

    // Drain: refuse new work, let what is queued and running finish, then cancel the rest.
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
    liveness->stop();
    // Let the HTTP threads write the last events of their streams.
    auto write_until = Clock::now() + std::chrono::seconds(2);
    while (state.open_streams.load() > 0 && Clock::now() < write_until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stop_http();
    spdlog::info("shut down cleanly ({} requests served)", state.metrics.requests(RequestOutcome::Ok));
    return 0;
}

}  // namespace k3::server
