// Many clients, one worker: the real `k3serve serve` on the tiny model over loopback, with
// clients that misbehave beside one that does not. A client that stops reading its stream is
// cancelled alone once its unread output passes --client-buffer-kb, while another stream runs to
// its end (the engine worker never waits on a client: docs/operations.md).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/daemon.h"
#include "common/loopback_socket.h"
#include "common/metric_value.h"
#include "common/model_cache.h"
#include "common/wait.h"

using namespace k3::test;
using nlohmann::json;

namespace {

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
    REQUIRE(eventually([&] { return metric_value(c, "llamacpp:requests_processing") == 1; }, std::chrono::seconds(60)));

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
    CHECK(eventually([&] { return metric_value(c, "k3serve:slow_client_cancellations_total") == 1; }));
    // The log line reaches the test through the daemon's stderr pipe and the reader thread
    // (common/daemon.h), possibly after the counter moved: wait for it.
    CHECK(eventually([&] { return d.log().find("its client took none of the last 256 KiB of output") != std::string::npos; }));
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

TEST_CASE("tiny model: an idle flood cannot lock the door: the oldest idle connections make room, /health, /metrics and completions are served") {
    std::string model = cached_model("tiny");
    // First-byte deadline of an hour: only the caps can clear the flood here.
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--max-connections", "64",
                     "--max-connections-per-address", "48", "--first-byte-timeout-s", "3600"});
    // 160 sockets that never send a byte, from this test's one address: 2.5x the total cap.
    std::vector<std::unique_ptr<LoopbackSocket>> flood;
    for (int i = 0; i < 160; ++i) {
        flood.push_back(std::make_unique<LoopbackSocket>(d.port()));
        REQUIRE(flood.back()->ok());
    }
    auto c = d.client();
    // Each new connection (the client's own included) closes the address's oldest idle one.
    auto health = c.Get("/health");
    REQUIRE(health);
    CHECK(health->status == 200);
    auto completion = c.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json");
    REQUIRE(completion);
    CHECK(completion->status == 200);
    auto m = c.Get("/metrics");
    REQUIRE(m);
    CHECK(m->status == 200);
    INFO(m->body);
    CHECK(metric_value(c, "k3serve:http_connections_open") <= 48 + 1);
    // The oldest were closed first; the newest still wait.
    CHECK(flood.front()->read_to_close(20000).empty());
    CHECK(flood.front()->closed());
    CHECK(m->body.find("k3serve:http_connections_closed_total{reason=\"evicted_idle\"}") != std::string::npos);
    CHECK(flood.back()->send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    CHECK(LoopbackSocket::status_of(flood.back()->read_until("\r\n\r\n")) == 200);
}

TEST_CASE("tiny model: at the total cap with nobody idle, /health and /metrics are still answered, and a silent socket meets its first-byte deadline") {
    std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--max-connections", "8",
                     "--max-connections-per-address", "0", "--first-byte-timeout-s", "1", "--header-timeout-s", "3600"});
    // Eight connections each half-way through a request head: none is idle, none can be closed.
    std::vector<std::unique_ptr<LoopbackSocket>> busy;
    for (int i = 0; i < 8; ++i) {
        busy.push_back(std::make_unique<LoopbackSocket>(d.port()));
        REQUIRE(busy.back()->send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
    }
    auto c = d.client();
    REQUIRE(eventually([&] { return metric_value(c, "k3serve:http_connections_open") >= 8; }));
    auto health = c.Get("/health");
    REQUIRE(health);
    CHECK(health->status == 200);
    CHECK(metric_value(c, "k3serve:http_connections_open") >= 8);
    auto completion = c.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json");
    REQUIRE(completion);
    CHECK(completion->status == 503);
    CHECK(completion->has_header("Retry-After"));
    // The half-sent heads are still served once they finish.
    REQUIRE(busy.front()->send("\r\n"));
    CHECK(LoopbackSocket::status_of(busy.front()->read_until("\r\n\r\n")) == 200);
    // A socket that says nothing is closed at its first-byte deadline (the head's is an hour).
    LoopbackSocket silent(d.port());
    REQUIRE(silent.ok());
    silent.read_to_close(20000);
    CHECK(silent.closed());
    CHECK(eventually([&] {
        auto r = c.Get("/metrics");
        return r && r->body.find("k3serve:http_connections_closed_total{reason=\"first_byte_deadline\"} 1") != std::string::npos;
    }));
}

// The load run's idle flood as states (tests/bench/load_slow_reader.py measures the rates): a
// flood of sockets from several addresses, most silent and some with half a head, held beside
// normal traffic, costs the normal clients nothing they can see: their streams run to their end,
// /health answers, and the flood is still there afterwards (nothing had to be closed for them).
TEST_CASE("tiny model: an idle flood beside normal traffic: 400 silent and half-head sockets from four addresses stay while two streams finish and /health answers") {
    std::string model = cached_model("tiny");
    // Deadlines of an hour: only the caps could close the flood, and 400 sockets from four
    // addresses are under both (1024 in total, 256 an address).
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--parallel", "2", "--draft-max", "0",
                     "--first-byte-timeout-s", "3600", "--header-timeout-s", "3600"});
    auto c = d.client();
    const char* addresses[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"};
    const int flood_size = 400;
    std::vector<std::unique_ptr<LoopbackSocket>> flood;
    for (int i = 0; i < flood_size; ++i) {
        flood.push_back(std::make_unique<LoopbackSocket>(d.port(), 0, addresses[i % 4]));
        REQUIRE(flood.back()->ok());
        if (i % 4 == 3) REQUIRE(flood.back()->send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
    }
    REQUIRE(eventually([&] { return metric_value(c, "k3serve:http_connections_open") >= flood_size; }));

    const int tokens = 256;
    struct Answer {
        int status = -1;
        std::string body;
    };
    std::vector<Answer> results(2);
    std::vector<std::thread> streams;
    for (size_t k = 0; k < results.size(); ++k)
        streams.emplace_back([&, k] {
            auto sc = d.client();
            const json request = {{"prompt", k ? "a" : "b"}, {"max_tokens", tokens}, {"stream", true},
                                  {"ignore_eos", true}, {"stream_options", {{"include_usage", true}}}};
            if (auto r = sc.Post("/v1/completions", request.dump(), "application/json")) results[k] = {r->status, r->body};
        });
    auto health = c.Get("/health");
    REQUIRE(health);
    CHECK(health->status == 200);
    for (auto& t : streams) t.join();
    for (const auto& r : results) {
        REQUIRE(r.status == 200);
        auto [n, finish] = stream_usage(r.body);
        CHECK(n == tokens);
        CHECK(finish == "length");
    }
    // The flood is still held: nothing was closed to make room.
    auto m = c.Get("/metrics");
    REQUIRE(m);
    INFO(m->body);
    CHECK(metric_value(c, "k3serve:http_connections_open") >= flood_size);
    CHECK(m->body.find("k3serve:http_connections_closed_total{reason=\"evicted_idle\"} 0\n") != std::string::npos);
    CHECK(m->body.find("k3serve:http_connections_closed_total{reason=\"refused_total\"} 0\n") != std::string::npos);
    // A half-sent head, finished, is served.
    REQUIRE(flood[3]->send("\r\n"));
    CHECK(LoopbackSocket::status_of(flood[3]->read_until("\r\n\r\n")) == 200);
}
