// The load figures a balancer reads (docs/operations.md, "Several daemons behind a load
// balancer"): the /metrics gauges for requests queued and running and for the context they
// hold, and the HAProxy agent-check line whose weight falls as they fill. In-process over the
// FakeEngine, whose hold keeps a request on the worker for as long as the test needs; the real
// daemon's --agent-port is in test_daemon_load_figures.cpp and behind HAProxy in
// tests/deploy/test_load_balancer.py.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <thread>

#include "common/loopback_socket.h"
#include "load_figures.h"
#include "ops/agent_port.h"
#include "server_harness.h"

using namespace k3::test;

namespace {

// The value of an unlabelled series in a /metrics exposition (-1 when absent).
double gauge(httplib::Client& c, const std::string& name) {
    auto r = c.Get("/metrics");
    REQUIRE(r);
    std::istringstream in(r->body);
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
    return -1;
}

// One agent-check answer, as HAProxy reads it: connect, read the line, the peer closes.
std::string agent_line(int port) {
    LoopbackSocket s(port);
    REQUIRE(s.ok());
    return s.read_to_close();
}

// The weight the documented rule gives for these gauges (written out here, apart from the code).
int expected_weight(double queued, double running, double parallel, double in_use, double capacity) {
    const double pressure = std::min(1.0, std::max((queued + running) / (2 * parallel), in_use / capacity));
    return std::max(1, int(std::floor((1 - pressure) * 10 + 1e-9)) * 10);
}

}  // namespace

TEST_CASE("load figures: queued and running requests and their context are gauges, and the agent weight follows them") {
    auto config = test_config();
    config.parallel = 1;
    config.queue_depth = 4;
    FakeEngineOptions o;
    o.hold = std::make_shared<Gate>();  // the first job stays on the worker until the test lets go
    o.hold_at_token = 2;
    TestServer server(config, o);
    AgentPort agent([&] { return agent_reply(server.state); });
    const int agent_port = agent.start("127.0.0.1", 0);
    auto c = server.client();
    const double capacity = gauge(c, "k3serve:context_tokens_capacity");
    CHECK(capacity == double(server.state.limits.n_ctx));

    // Idle: nothing held, full weight.
    CHECK(gauge(c, "k3serve:requests_queued") == 0);
    CHECK(gauge(c, "k3serve:requests_running") == 0);
    CHECK(gauge(c, "k3serve:context_tokens_in_use") == 0);
    CHECK(gauge(c, "k3serve:load_weight_percent") == 100);
    CHECK(gauge(c, "vllm:num_requests_waiting") == 0);
    CHECK(gauge(c, "vllm:num_requests_running") == 0);
    CHECK(gauge(c, "vllm:kv_cache_usage_perc") == 0);
    CHECK(agent_line(agent_port) == "ready 100%\n");

    // One request on the worker (held after two tokens), one in the queue.
    std::thread busy([&] {
        auto b = server.client();
        post_json(b, "/v1/completions", {{"prompt", "a longer prompt of several words"}, {"max_tokens", 40}});
    });
    REQUIRE(server.engine.options().held->wait());
    std::thread queued([&] {
        auto q = server.client();
        post_json(q, "/v1/completions", {{"prompt", "b"}, {"max_tokens", 2}});
    });
    REQUIRE(eventually([&] { return server.state.queue.size() == 1; }));
    CHECK(gauge(c, "k3serve:requests_queued") == 1);
    CHECK(gauge(c, "k3serve:requests_running") == 1);
    // The context in use is the running request's prompt and output, as /v1/status reports them.
    auto status = c.Get("/v1/status");
    REQUIRE(status);
    const json active = json::parse(status->body)["active"];
    REQUIRE(active.size() == 1);
    const int held_tokens = active[0]["prompt_tokens"].get<int>() + active[0]["generated_tokens"].get<int>();
    CHECK(held_tokens > 2);
    CHECK(gauge(c, "k3serve:context_tokens_in_use") == held_tokens);
    // The endpoint picker's names for the same figures (vLLM's).
    CHECK(gauge(c, "vllm:num_requests_waiting") == 1);
    CHECK(gauge(c, "vllm:num_requests_running") == 1);
    CHECK(gauge(c, "vllm:kv_cache_usage_perc") == doctest::Approx(held_tokens / capacity));
    // Two requests on one slot is full: the least weight, not 0 (0 takes it out like a failure).
    const int busy_weight = expected_weight(1, 1, 1, held_tokens, capacity);
    CHECK(busy_weight == 1);
    CHECK(gauge(c, "k3serve:load_weight_percent") == busy_weight);
    CHECK(agent_line(agent_port) == "ready 1%\n");

    server.engine.options().hold->open();
    busy.join();
    queued.join();
    CHECK(eventually([&] { return gauge(c, "k3serve:requests_running") == 0; }));
    CHECK(gauge(c, "k3serve:context_tokens_in_use") == 0);
    CHECK(agent_line(agent_port) == "ready 100%\n");
}

TEST_CASE("load figures: the weight falls with the context in use when slots are free") {
    auto config = test_config();
    config.parallel = 4;
    FakeEngineOptions o;
    o.hold = std::make_shared<Gate>();
    o.hold_at_token = 0;
    TestServer server(config, o);
    auto c = server.client();
    const double capacity = gauge(c, "k3serve:context_tokens_capacity");
    CHECK(capacity == 4.0 * server.state.limits.n_ctx);
    // One request whose prompt fills most of one slot's context: a quarter of the capacity
    // less a little, so the requests' share (1 of 8) is the smaller one.
    const std::string prompt(size_t(server.state.limits.n_ctx - 16), 'w');  // a token a byte
    std::thread busy([&] {
        auto b = server.client();
        post_json(b, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 4}});
    });
    REQUIRE(server.engine.options().held->wait());
    const double in_use = gauge(c, "k3serve:context_tokens_in_use");
    CHECK(in_use > capacity / 8);
    const int w = expected_weight(0, 1, 4, in_use, capacity);
    CHECK(w < 100);
    CHECK(gauge(c, "k3serve:load_weight_percent") == w);
    server.engine.options().hold->open();
    busy.join();
}

TEST_CASE("load figures: the agent says drain while the model loads") {
    TestServer server(test_config(), {}, /*ready=*/false);
    AgentPort agent([&] { return agent_reply(server.state); });
    const int agent_port = agent.start("127.0.0.1", 0);
    CHECK(agent_line(agent_port) == "drain\n");
    server.state.phase = Phase::Ready;
    CHECK(agent_line(agent_port) == "ready 100%\n");
}
