// Many clients, one worker: the real `k3serve serve` on the tiny model over loopback, with
// clients that misbehave beside one that does not. A client that stops reading its stream is
// cancelled alone once its unread output passes --client-buffer-kb, while another stream runs to
// its end (the engine worker never waits on a client: docs/operations.md).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "common/daemon.h"
#include "common/loopback_socket.h"
#include "common/model_cache.h"
#include "common/wait.h"

using namespace k3::test;
using nlohmann::json;

namespace {

// The value of an unlabelled series in a /metrics exposition (-1 when absent).
double metric(httplib::Client& c, const std::string& name) {
    auto r = c.Get("/metrics");
    if (!r) return -1;
    std::istringstream in(r->body);
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
    return -1;
}

int n_ctx(httplib::Client& c) {
    auto r = c.Get("/props");
    REQUIRE(r);
    return json::parse(r->body)["n_ctx"].get<int>();
}

// The completion tokens a completions SSE body reports (stream_options.include_usage) and its
// finish reason.
std::pair<int, std::string> stream_usage(const std::string& body) {
    int tokens = -1;
    std::string finish;
    size_t pos = 0;
    while ((pos = body.find("data: ", pos)) != std::string::npos) {
        size_t end = body.find("\n\n", pos);
        std::string data = body.substr(pos + 6, end - pos - 6);
        pos = end;
        if (data == "[DONE]") break;
        json j = json::parse(data);
        REQUIRE_FALSE(j.contains("error"));
        if (j.contains("usage") && j["usage"].is_object()) tokens = j["usage"]["completion_tokens"].get<int>();
        if (!j["choices"].empty() && !j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
    }
    return {tokens, finish};
}

}  // namespace

TEST_CASE("tiny model: a client that stops reading is cancelled alone at its buffer budget; another stream runs to its end") {
    std::string model = cached_model("tiny");
    // A write deadline of an hour: only the byte budget can end the stalled stream, so a worker
    // that waited for that client would hold the other stream for the hour.
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--parallel", "2", "--draft-max", "0",
                     "--client-buffer-kb", "256", "--slow-client-s", "3600"});
    auto c = d.client();
    const int ctx = n_ctx(c);
    // The stalled client asks for ~1.8 MB of events (every token with 5 alternatives): more
    // than the connection's kernel buffers (256 KiB sent, doubled by the kernel, plus its small
    // receive buffer), the events its HTTP thread holds (less than the budget) and the budget
    // together. It never reads.
    const json stalled_request = {{"prompt", "x"}, {"max_tokens", ctx - 64}, {"stream", true}, {"logprobs", 5},
                                  {"ignore_eos", true}, {"temperature", 0}};
    LoopbackSocket stalled(d.port(), 4096);
    REQUIRE(stalled.ok());
    REQUIRE(stalled.send(json_post("/v1/completions", stalled_request.dump())));
    REQUIRE(eventually([&] { return metric(c, "llamacpp:requests_processing") == 1; }, std::chrono::seconds(60)));

    // The other stream's whole output (~0.1 MB of events) is below the budget, so however late
    // its reader runs it is never cut; it must get every token while the stalled one is held.
    const int other_tokens = 512;
    const json other = {{"prompt", "y"}, {"max_tokens", other_tokens}, {"stream", true}, {"ignore_eos", true},
                        {"stream_options", {{"include_usage", true}}}};
    auto r = c.Post("/v1/completions", other.dump(), "application/json");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    auto [tokens, finish] = stream_usage(r->body);
    CHECK(tokens == other_tokens);
    CHECK(finish == "length");

    // The stalled stream was cancelled, counted and logged.
    CHECK(eventually([&] { return metric(c, "k3serve:slow_client_cancellations_total") == 1; }));
    CHECK(d.log().find("its client took none of the last 256 KiB of output") != std::string::npos);
    auto m = c.Get("/metrics");
    REQUIRE(m);
    INFO(d.log());
    CHECK(m->body.find("k3serve:requests_total{outcome=\"cancelled\"} 1") != std::string::npos);
    CHECK(m->body.find("k3serve:requests_total{outcome=\"ok\"} 1") != std::string::npos);
    // Hanging up frees its connection thread; the daemon serves on.
    stalled.close();
    auto again = c.Post("/v1/completions", json({{"prompt", "still here"}, {"max_tokens", 2}}).dump(), "application/json");
    REQUIRE(again);
    CHECK(again->status == 200);
}
