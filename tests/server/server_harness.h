// A complete daemon in-process for tests: real ServerState, EngineWorker and Router on
// 127.0.0.1 (any free port) over a FakeEngine and FakeTokenizer, plus small client helpers
// (httplib client, SSE parsing, a raw socket for disconnect tests).
#pragma once
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "common/wait.h"
#include "fake_engine.h"
#include "routes.h"
#include "routes/server_state.h"
#include "worker/worker.h"

namespace k3::test {

using nlohmann::json;
using namespace k3::server;

inline DaemonConfig test_config() {
    DaemonConfig c;
    c.model_dir = "/nonexistent/fake";
    c.model_alias = "fake";
    c.host = "127.0.0.1";
    c.port = 0;
    c.http_threads = 8;
    c.queue_depth = 4;
    c.sse_ping_s = 0.2;
    c.drain_timeout_s = 2;
    return c;
}

class TestServer {
public:
    explicit TestServer(DaemonConfig config = test_config(), FakeEngineOptions engine_options = {},
                        bool ready = true)
        : state(std::move(config)), engine(std::move(engine_options)), http(state) {
        state.start_time = 1700000000;
        state.info = engine.info();
        state.limits.model_name = state.config.model_alias;
        state.limits.n_vocab = engine.info().n_vocab;
        state.limits.n_ctx = state.config.n_ctx > 0 ? state.config.n_ctx : engine.info().n_ctx_max;
        state.limits.max_prompt_tokens = state.limits.n_ctx - 1;
        state.limits.new_turn_tool_required = state.config.new_turn_tool_choice == "required";
        state.limits.hosted_sampling = state.config.hosted_sampling;
        state.limits.grammar = state.config.grammar_limits();
        state.tokenizer = &tokenizer;
        state.limits.answer = answer_limit(tokenizer, state.config.max_answer_mb);
        WorkerOptions wo;
        wo.n_ctx = state.limits.n_ctx;
        wo.client_buffer_bytes = size_t(state.config.client_buffer_kb) * 1024;
        wo.abandoned_prefill_s = state.config.abandoned_prefill_s;
        wo.interleave_tokens = size_t(state.config.interleave_tokens);
        wo.decode_wait_s = state.config.decode_wait_s;
        wo.live = &state.live;
        wo.on_io_error = [this](const std::string& why) {
            if (on_io_error) on_io_error(why);
        };
        worker = std::make_unique<EngineWorker>(engine, tokenizer, state.queue, state.metrics, wo);
        state.token_table = worker->token_table();
        worker->start();
        port = http.bind("127.0.0.1", 0);
        http.start();
        if (ready) state.phase = Phase::Ready;
        // Wait until the listener accepts.
        for (int i = 0; i < 200; ++i) {
            httplib::Client probe("127.0.0.1", port);
            if (probe.Get("/health")) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    ~TestServer() {
        state.queue.close();
        state.queue.cancel_all(CancelReason::Shutdown);
        worker->cancel_current(CancelReason::Shutdown);
        worker->join();
        http.stop();
    }
    httplib::Client client() const {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(30, 0);
        return c;
    }

    std::function<void(const std::string&)> on_io_error;  // what serve_main wires to Liveness
    ServerState state;
    FakeTokenizer tokenizer;
    FakeEngine engine;
    std::unique_ptr<EngineWorker> worker;
    Router http;
    int port = 0;
};

inline httplib::Result post_json(httplib::Client& c, const std::string& path, const json& body) {
    return c.Post(path.c_str(), body.dump(), "application/json");
}

// The `data:` payloads of an SSE body, in order (comments dropped).
inline std::vector<std::string> sse_data(const std::string& body) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < body.size()) {
        size_t end = body.find("\n\n", pos);
        if (end == std::string::npos) break;
        std::string event = body.substr(pos, end - pos);
        pos = end + 2;
        if (event.rfind("data: ", 0) == 0) out.push_back(event.substr(6));
    }
    return out;
}

// A raw HTTP/1.1 request on a plain socket, so a test can hang up whenever it likes.
class RawClient {
public:
    explicit RawClient(int port) {
        fd_ = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(uint16_t(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fd_ = -1;
    }
    ~RawClient() { close(); }
    bool ok() const { return fd_ >= 0; }
    void send_post(const std::string& path, const std::string& body) {
        std::string req = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        ssize_t n = ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL);
        (void)n;
    }
    // Reads until `needle` appears in what was received (or ~10 s pass).
    std::string read_until(const std::string& needle) {
        timeval tv{0, 100000};
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        for (int i = 0; i < 100 && received_.find(needle) == std::string::npos; ++i) {
            char buf[4096];
            ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n > 0) received_.append(buf, size_t(n));
            if (n == 0) break;
        }
        return received_;
    }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_ = -1;
    std::string received_;
};

}  // namespace k3::test
