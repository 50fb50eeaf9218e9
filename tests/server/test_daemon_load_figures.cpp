// The real `k3serve serve` on the tiny model with --agent-port: HAProxy's agent-check line on
// its own port and the load gauges in /metrics (the rule itself is in test_load_figures.cpp).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "common/daemon.h"
#include "common/loopback_socket.h"
#include "common/model_cache.h"

using namespace k3::test;

TEST_CASE("tiny model: --agent-port answers HAProxy's agent-check with the load weight; /metrics has the load gauges") {
    DaemonProcess d({cached_model("tiny"), "--port", "0", "--threads", "1", "--parallel", "2", "--agent-port", "0"});
    std::smatch m;
    const std::string log = d.log();
    REQUIRE(std::regex_search(log, m, std::regex("agent-check: listening on 127\\.0\\.0\\.1:([0-9]+)")));
    const int agent_port = std::stoi(m[1]);
    LoopbackSocket agent(agent_port);
    REQUIRE(agent.ok());
    CHECK(agent.read_to_close() == "ready 100%\n");

    auto c = d.client();
    auto props = c.Get("/props");
    REQUIRE(props);
    const int n_ctx = nlohmann::json::parse(props->body)["n_ctx"].get<int>();
    auto r = c.Get("/metrics");
    REQUIRE(r);
    CHECK(r->body.find("\nk3serve:requests_queued 0\n") != std::string::npos);
    CHECK(r->body.find("\nk3serve:requests_running 0\n") != std::string::npos);
    CHECK(r->body.find("\nk3serve:context_tokens_in_use 0\n") != std::string::npos);
    CHECK(r->body.find("\nk3serve:context_tokens_capacity " + std::to_string(2 * n_ctx) + "\n") != std::string::npos);
    CHECK(r->body.find("\nk3serve:load_weight_percent 100\n") != std::string::npos);
}
