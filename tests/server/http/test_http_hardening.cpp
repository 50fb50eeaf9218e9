// Issue 10, over real HTTP on loopback (raw sockets where a well-behaved client library would
// not misbehave): slow and idle clients cannot starve the daemon, every body encoding obeys one
// limit, cross-site requests are refused, numbers that overflow are client errors, and the
// smaller protocol points (405 + Allow, HTTP/1.0 streams, half-close, Expect, CORS headers).
#include <doctest/doctest.h>
#include <poll.h>

#include <algorithm>
#include <cctype>
#include <future>

#include "common/loopback_socket.h"
#include "server_harness.h"

using namespace k3::test;

namespace {

using Ms = std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// The raw client of tests/common/loopback_socket.h, under the name these cases use.
using Socket = LoopbackSocket;
int status_of(const std::string& response) { return LoopbackSocket::status_of(response); }

std::string post(const std::string& path, const std::string& body, const std::string& extra_headers = "",
                 const char* version = "HTTP/1.1") {
    return "POST " + path + " " + version + "\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra_headers +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Milliseconds a fresh GET /health takes.
long long health_ms(int port) {
    auto t0 = SteadyClock::now();
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(10, 0);
    auto r = c.Get("/health");
    auto ms = std::chrono::duration_cast<Ms>(SteadyClock::now() - t0).count();
    return r && r->status == 200 ? ms : 1000000;
}

void check_error(const httplib::Result& r, int status, const std::string& code = "", const std::string& param = "") {
    REQUIRE(r);
    CHECK(r->status == status);
    json j = json::parse(r->body, nullptr, false);
    REQUIRE(j.contains("error"));
    if (!code.empty()) CHECK(j["error"]["code"] == code);
    if (!param.empty()) CHECK(j["error"]["param"] == param);
}

const std::string kCompletion = R"({"prompt": "hi", "max_tokens": 3, "temperature": 0})";

// The values of every Retry-After field in the head of a raw answer (the name in any case),
// joined with ", ": two fields read "2, 5", where a client's header map would show one.
std::string retry_after_fields(const std::string& response) {
    const std::string head = response.substr(0, response.find("\r\n\r\n") + 2);
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    std::string values;
    const std::string name = "\r\nretry-after:";
    for (size_t at = lower.find(name); at != std::string::npos; at = lower.find(name, at + 1)) {
        size_t begin = head.find_first_not_of(' ', at + name.size());
        values += (values.empty() ? "" : ", ") + head.substr(begin, head.find("\r\n", begin) - begin);
    }
    return values;
}

// The head of a POST whose body is not sent (yet).
std::string post_head(const std::string& path, size_t length, const std::string& extra_headers = "") {
    return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra_headers +
           "Content-Length: " + std::to_string(length) + "\r\n\r\n";
}

}  // namespace

TEST_CASE("slow header senders get 408 at the head deadline and never starve /health") {
    auto config = test_config();
    config.http_threads = 8;
    config.header_timeout_s = 1.5;
    TestServer server(config);
    // Twice as many dribblers as there used to be connection threads.
    std::vector<std::unique_ptr<Socket>> dribblers;
    for (int i = 0; i < 16; ++i) {
        dribblers.push_back(std::make_unique<Socket>(server.port));
        REQUIRE(dribblers.back()->ok());
        dribblers.back()->send("GET /health HTTP/1.1\r\n");
    }
    for (int step = 0; step < 5; ++step) {
        for (auto& d : dribblers) d->send("X-Dribble-" + std::to_string(step) + ": 1\r\n");
        CHECK(health_ms(server.port) < 1000);
        std::this_thread::sleep_for(Ms(100));
    }
    // Past the deadline each gets 408 and is closed, however slowly it keeps sending.
    for (auto& d : dribblers) {
        std::string got = d->read_until("\r\n\r\n", 5000);
        CHECK(status_of(got) == 408);
        d->read_to_close(2000);
        CHECK(d->closed());
    }
}

TEST_CASE("idle keep-alive connections hold no thread") {
    auto config = test_config();
    config.http_threads = 8;
    TestServer server(config);
    std::vector<std::unique_ptr<Socket>> idle;
    for (int i = 0; i < 24; ++i) {
        idle.push_back(std::make_unique<Socket>(server.port));
        idle.back()->send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        CHECK(status_of(idle.back()->read_until("\"ok\"")) == 200);
    }
    CHECK(health_ms(server.port) < 1000);
}

// Clients reuse an idle socket for up to their own keep-alive time (Node's fetch 4 s, httpx 5 s);
// a daemon closing idle sockets at 5 s raced them: the client's next request met a closing socket
// ("other side closed"). A socket idle past every client's reuse time is still served.
TEST_CASE("an idle keep-alive connection still takes a request after 6 s") {
    TestServer server(test_config());
    Socket s(server.port);
    s.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    CHECK(status_of(s.read_until("\"ok\"")) == 200);
    const size_t first = s.read_until("\"ok\"").size();
    std::this_thread::sleep_for(std::chrono::seconds(6));
    CHECK(s.send("GET /no-such-route HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    const std::string got = s.read_until("HTTP/1.1 404");
    CHECK(got.find("HTTP/1.1 404", first) != std::string::npos);
    CHECK_FALSE(s.closed());
}

TEST_CASE("more long generations than threads: the overflow gets 503 + Retry-After at once") {
    auto config = test_config();
    config.http_threads = 8;
    config.queue_depth = 8;
    FakeEngineOptions eo;
    eo.token_delay = Ms(100);
    TestServer server(config, eo);
    std::vector<std::future<int>> results;
    std::atomic<int> rejected_fast{0};
    auto t0 = SteadyClock::now();
    for (int i = 0; i < 16; ++i) {
        results.push_back(std::async(std::launch::async, [&, i] {
            auto c = server.client();
            auto r = post_json(c, "/v1/completions",
                               {{"prompt", "go " + std::to_string(i)}, {"max_tokens", 10}, {"temperature", 0}});
            if (!r) return -1;
            if (r->status == 503) {
                CHECK(r->has_header("Retry-After"));
                if (SteadyClock::now() - t0 < Ms(900)) ++rejected_fast;  // before the first job could end
            }
            return r->status;
        }));
        std::this_thread::sleep_for(Ms(5));
    }
    int ok = 0, busy = 0;
    for (auto& f : results) {
        int s = f.get();
        ok += s == 200;
        busy += s == 503;
    }
    CHECK(ok + busy == 16);
    CHECK(busy >= 7);  // 1 running + 8 queued fit
    CHECK(rejected_fast.load() == busy);
}

TEST_CASE("a 503 refused before routing carries exactly one Retry-After field") {
    SUBCASE("past the per-address connection cap (answered at accept)") {
        auto config = test_config();
        config.max_connections_per_address = 1;
        TestServer server(config);
        // From an address of its own (the harness's probes came from 127.0.0.1): a connection
        // with part of a head sent is not idle, so the next one from there is refused.
        Socket holder(server.port, 0, "127.0.0.2");
        REQUIRE(holder.ok());
        REQUIRE(holder.send("GET /health HTTP/1.1\r\n"));
        Socket refused(server.port, 0, "127.0.0.2");
        REQUIRE(refused.ok());
        const std::string got = refused.read_until("\r\n\r\n", 5000);
        CHECK(status_of(got) == 503);
        CHECK(retry_after_fields(got) == "2");
    }
    SUBCASE("request bodies over --max-inflight-body-mb (answered at the head), on each API's path") {
        auto config = test_config();
        config.max_inflight_body_mb = 1;
        TestServer server(config);
        for (std::string path : {"/v1/completions", "/v1/messages"}) {
            CAPTURE(path);
            // 700 KB admitted (Continue) holds the budget; a second 700 KB head does not fit.
            Socket holder(server.port);
            REQUIRE(holder.send(post_head(path, 700'000, "Expect: 100-continue\r\n")));
            REQUIRE(holder.read_until("\r\n\r\n", 5000).rfind("HTTP/1.1 100 Continue", 0) == 0);
            Socket refused(server.port);
            REQUIRE(refused.send(post_head(path, 700'000)));
            const std::string got = refused.read_until("\r\n\r\n", 5000);
            CHECK(status_of(got) == 503);
            CHECK(retry_after_fields(got) == "2");
        }
    }
    SUBCASE("while the model loads (the gate), for a head with a body and for one without") {
        TestServer server(test_config(), {}, /*ready=*/false);
        Socket with_body(server.port);
        REQUIRE(with_body.send(post_head("/v1/completions", kCompletion.size())));
        const std::string got = with_body.read_until("\r\n\r\n", 5000);
        CHECK(status_of(got) == 503);
        CHECK(retry_after_fields(got) == "5");
        Socket get(server.port);
        REQUIRE(get.send("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
        const std::string models = get.read_until("\r\n\r\n", 5000);
        CHECK(status_of(models) == 503);
        CHECK(retry_after_fields(models) == "5");
    }
}

TEST_CASE("Content-Length that is negative, huge or not a number is 400 at once") {
    TestServer server;
    for (const char* length : {"-5", "99999999999999999999", "12abc", "1e3"}) {
        CAPTURE(length);
        Socket s(server.port);
        s.send(std::string("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           "Content-Length: ") + length + "\r\n\r\n{}");
        CHECK(status_of(s.read_until("\r\n\r\n", 3000)) == 400);
    }
    Socket s(server.port);
    s.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999999999999999\r\n\r\n");
    CHECK(status_of(s.read_until("\r\n\r\n", 3000)) == 413);
}

TEST_CASE("one body limit for every framing and encoding, before routing and keys") {
    auto config = test_config();
    config.max_body_bytes = 64 * 1024;
    config.api_keys = {"sekrit"};
    TestServer server(config);
    SUBCASE("chunked body over the limit: 413 without reading it all") {
        Socket s(server.port);
        s.send("POST /health HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n");
        std::string chunk(16 * 1024, 'a');
        bool refused = false;
        for (int i = 0; i < 64 && !refused; ++i) {
            char size[16];
            std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
            refused = !s.send(size + chunk + "\r\n");
            if (!refused && i > 8) refused = status_of(s.read_until("\r\n\r\n", 10)) == 413;
        }
        CHECK(status_of(s.read_until("\r\n\r\n", 3000)) == 413);
    }
    SUBCASE("one chunk that declares more than the limit") {
        Socket s(server.port);
        s.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n");
        CHECK(status_of(s.read_until("\r\n\r\n", 3000)) == 413);
    }
    SUBCASE("a gzip body is refused (it could inflate past the limit)") {
        Socket s(server.port);
        s.send(post("/v1/completions", std::string(100, 'x'), "Content-Encoding: gzip\r\nAuthorization: Bearer sekrit\r\n"));
        CHECK(status_of(s.read_until("\r\n\r\n", 3000)) == 415);
    }
    SUBCASE("a header line with no end") {
        Socket s(server.port);
        s.send("GET /health HTTP/1.1\r\nX-Long: ");
        std::string more(64 * 1024, 'a');
        for (int i = 0; i < 8 && s.send(more); ++i) {
        }
        CHECK(status_of(s.read_until("\r\n\r\n", 3000)) == 431);
    }
    SUBCASE("a request line with no end") {
        Socket s(server.port);
        s.send("GET /" + std::string(64 * 1024, 'a'));
        CHECK(status_of(s.read_until("\r\n\r\n", 3000)) == 414);
    }
    SUBCASE("too many header fields") {
        std::string req = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";
        for (int i = 0; i < 200; ++i) req += "X-H" + std::to_string(i) + ": 1\r\n";
        Socket s(server.port);
        s.send(req + "\r\n");
        CHECK(status_of(s.read_until("\r\n\r\n", 3000)) == 431);
    }
    SUBCASE("Expect: 100-continue with an over-limit length is refused before the upload") {
        Socket s(server.port);
        s.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               "Expect: 100-continue\r\nContent-Length: 10000000\r\n\r\n");
        std::string got = s.read_until("\r\n\r\n", 3000);
        CHECK(got.rfind("HTTP/1.1 413", 0) == 0);
    }
}

TEST_CASE("a body of many small JSON values is refused before it is parsed (413), a context's worth is served") {
    TestServer server;  // context 256: 256 + 65536 values
    auto c = server.client();
    // 8 MiB of "1," is 4M values: a DOM of ~10x the body's size if it were built.
    std::string ones = R"({"prompt": [)";
    while (ones.size() < (8u << 20) - 64) ones += "1,";
    ones += "1]}";
    check_error(c.Post("/v1/completions", ones, "application/json"), 413, "too_many_json_values");
    std::string members = "{";
    for (int i = 0; i < 70000; ++i) members += "\"k" + std::to_string(i) + "\":0,";
    members += R"("prompt": "x"})";
    check_error(c.Post("/v1/completions", members, "application/json"), 413, "too_many_json_values");
    // Brackets and commas inside strings are text, not values.
    check_error(post_json(c, "/v1/completions", {{"prompt", std::string(100000, '[') + std::string(100000, ',')}, {"max_tokens", 1}}), 400,
                "context_length_exceeded");
    // A prompt of token ids as long as the context allows is still a prompt.
    json ids = json::array();
    for (int i = 0; i < 250; ++i) ids.push_back(65 + i % 26);
    CHECK(post_json(c, "/v1/completions", {{"prompt", ids}, {"max_tokens", 2}})->status == 200);
    check_error(c.Post("/v1/completions", std::string(100, '[') + std::string(100, ']'), "application/json"), 400,
                "invalid_json");
    CHECK(server.state.metrics.requests(RequestOutcome::Error) == 0);
}

TEST_CASE("Expect: 100-continue within the limit gets Continue, then the answer") {
    TestServer server;
    Socket s(server.port);
    s.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           "Expect: 100-continue\r\nContent-Length: " + std::to_string(kCompletion.size()) + "\r\n\r\n");
    CHECK(s.read_until("\r\n\r\n", 3000).rfind("HTTP/1.1 100", 0) == 0);
    s.send(kCompletion);
    CHECK(status_of(s.read_until("text_completion", 5000)) == 200);
}

TEST_CASE("cross-site protection: JSON bodies only, loopback Host names only") {
    TestServer server;
    auto c = server.client();
    check_error(c.Post("/v1/completions", kCompletion, "text/plain"), 415);
    check_error(c.Post("/v1/completions", kCompletion, "application/x-www-form-urlencoded"), 415);
    CHECK(c.Post("/v1/completions", kCompletion, "application/json; charset=utf-8")->status == 200);
    check_error(c.Get("/props", {{"Host", "evil.example"}}), 403, "host_not_allowed");
    check_error(c.Get("/v1/models", {{"Host", "evil.example:8080"}}), 403);
    CHECK(c.Get("/props", {{"Host", "localhost:8080"}})->status == 200);
    CHECK(c.Get("/props", {{"Host", "127.0.0.1"}})->status == 200);
}

TEST_CASE("--allowed-hosts and --api-key lift the Host guard") {
    auto config = test_config();
    config.allowed_hosts = {"k3.internal"};
    TestServer server(config);
    auto c = server.client();
    CHECK(c.Get("/props", {{"Host", "k3.internal:80"}})->status == 200);
    check_error(c.Get("/props", {{"Host", "evil.example"}}), 403);
    config.allowed_hosts.clear();
    config.api_keys = {"k"};
    TestServer keyed(config);
    auto k = keyed.client();
    CHECK(k.Get("/props", {{"Host", "evil.example"}, {"Authorization", "Bearer k"}})->status == 200);
}

TEST_CASE("token counts and numbers that overflow are clamped to the context, never narrowed or a 500") {
    TestServer server;
    auto c = server.client();
    for (const char* n : {"1000000000000", "4294967295", "4294967301", "2147483647", "9223372036854775807",
                          "18446744073709551616", "1e30"}) {
        CAPTURE(n);
        std::string body = std::string(R"({"prompt": "x", "max_tokens": )") + n + "}";
        // clamped to what the context leaves, never narrowed to a small or negative int
        auto r = c.Post("/v1/completions", body, "application/json");
        REQUIRE(r);
        CHECK(r->status == 200);
        CHECK(r->get_header_value("X-K3-Max-Tokens-Clamped").find("max_tokens=") == 0);
        // (thinking off: the effort message alone, in the fake's byte tokens, outgrows its context)
        std::string chat =
            std::string(R"({"messages": [{"role":"user","content":"x"}], "thinking": false, "max_completion_tokens": )") + n + "}";
        auto rc = c.Post("/v1/chat/completions", chat, "application/json");
        REQUIRE(rc);
        CHECK(rc->status == 200);
    }
    check_error(c.Post("/v1/completions", R"({"prompt": "x", "temperature": 1e400})", "application/json"), 400);
    check_error(c.Post("/v1/completions", R"({"prompt": "x", "top_k": 1e300})", "application/json"), 400);
    check_error(c.Post("/v1/chat/completions", R"({"messages": [{"role":"user","content":"x"}], "response_format": {"type": 5}})",
                       "application/json"),
                400);
    check_error(c.Post("/v1/chat/completions", R"({"messages": [{"role":"user","content":[{"type": 5, "text": "x"}]}]})",
                       "application/json"),
                400);
    check_error(c.Post("/v1/chat/completions", R"({"messages": [{"role":"user","content":"x"}], "thinking": {"type": 1}})",
                       "application/json"),
                400);
    CHECK(server.state.metrics.requests(RequestOutcome::Error) == 0);
}

TEST_CASE("sampler range errors name their own parameter") {
    TestServer server;
    auto c = server.client();
    check_error(c.Post("/v1/completions", R"({"prompt": "x", "top_p": 1.5})", "application/json"), 400, "", "top_p");
    check_error(c.Post("/v1/completions", R"({"prompt": "x", "min_p": 1.0})", "application/json"), 400, "", "min_p");
    check_error(c.Post("/v1/completions", R"({"prompt": "x", "temperature": 2.5})", "application/json"), 400, "",
                "temperature");
}

TEST_CASE("/tokenize is bounded like a prompt") {
    TestServer server;  // context 256 -> 4096 bytes
    auto c = server.client();
    check_error(post_json(c, "/tokenize", {{"content", std::string(5000, 'a')}, {"with_pieces", true}}), 400);
    check_error(post_json(c, "/tokenize", {{"content", std::string(300, 'a')}}), 400, "context_length_exceeded");
    CHECK(post_json(c, "/tokenize", {{"content", std::string(200, 'a')}, {"with_pieces", true}})->status == 200);
}

TEST_CASE("protocol details: 405 + Allow, models/{id}, bearer in any case, escaped paths") {
    auto config = test_config();
    config.api_keys = {"sekrit"};
    TestServer server(config);
    auto c = server.client();
    httplib::Headers key = {{"Authorization", "bearer sekrit"}};
    auto r = c.Get("/v1/completions", key);
    check_error(r, 405);
    CHECK(r->get_header_value("Allow") == "POST");
    auto m = c.Get("/v1/models/fake", key);
    REQUIRE(m);
    CHECK(m->status == 200);
    CHECK(json::parse(m->body)["id"] == "fake");
    CHECK(json::parse(c.Get("/v1/models/gpt-4", key)->body)["id"] == "gpt-4");  // any name is served
    check_error(c.Get("/v1/models%0a/fake", key), 404);
    CHECK(c.Get("/v1/models", {{"X-Api-Key", "sekrit"}})->status == 200);
}

TEST_CASE("a client that half-closes after its request still gets the answer") {
    TestServer server;
    Socket s(server.port);
    s.send(post("/v1/completions", kCompletion));
    s.shutdown_write();
    std::string got = s.read_to_close(5000);
    CHECK(status_of(got) == 200);
    CHECK(got.find("text_completion") != std::string::npos);
}

TEST_CASE("an HTTP/1.0 client gets a plain stream it can read, closed at the end") {
    TestServer server;
    Socket s(server.port);
    s.send(post("/v1/completions", R"({"prompt": "hi", "max_tokens": 3, "stream": true})", "", "HTTP/1.0"));
    std::string got = s.read_to_close(5000);
    CHECK(got.rfind("HTTP/1.0 200", 0) == 0);
    CHECK(got.find("Transfer-Encoding") == std::string::npos);
    CHECK(got.find("\r\n\r\ndata: {") != std::string::npos);
    CHECK(got.find("data: [DONE]\n\n") != std::string::npos);
    CHECK(s.closed());
}

TEST_CASE("CORS preflight allows the headers the browser asks for; no compressed answers") {
    auto config = test_config();
    config.cors_origin = "http://localhost:3000";
    TestServer server(config);
    auto c = server.client();
    auto r = c.Options("/v1/chat/completions", {{"Origin", "http://localhost:3000"},
                                                {"Access-Control-Request-Method", "POST"},
                                                {"Access-Control-Request-Headers", "authorization, content-type, x-stainless-os, x-api-key"}});
    REQUIRE(r);
    CHECK(r->status == 204);
    std::string allowed = r->get_header_value("Access-Control-Allow-Headers");
    CHECK(allowed.find("x-stainless-os") != std::string::npos);
    CHECK(allowed.find("x-api-key") != std::string::npos);
    auto g = c.Get("/v1/models", {{"Accept-Encoding", "gzip;q=0, identity"}});
    REQUIRE(g);
    CHECK_FALSE(g->has_header("Content-Encoding"));
}

TEST_CASE("liveness: a long prefill that makes progress feeds the watchdog; a stuck one starves it") {
    FakeEngineOptions eo;
    eo.prefill_delay = Ms(40);  // 40 tokens: 1.6 s of prefill, progress every token ("layer")
    TestServer server(test_config(), eo);
    std::atomic<int> pings{0};
    LivenessOptions lo;
    lo.stuck_after_s = 0.5;
    lo.watchdog = std::chrono::microseconds(200000);  // WATCHDOG_USEC=0.2 s: ping every 0.1 s
    lo.ping = [&] { ++pings; };
    Liveness live([&] { return server.worker->busy(); }, [&] { return server.engine.progress(); }, lo);
    server.state.liveness = &live;
    live.start();
    auto c = server.client();
    auto r = post_json(c, "/v1/completions", {{"prompt", std::string(40, 'p')}, {"max_tokens", 1}});
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(pings.load() >= 10);  // fed all through the 1.6 s prefill (stuck_after is 0.5 s)
    CHECK(c.Get("/health")->status == 200);

    // One "layer" that takes 3 s: no progress for longer than stuck_after.
    server.engine.options().prefill_delay = Ms(3000);
    auto pending = std::async(std::launch::async, [&] {
        auto c2 = server.client();
        return post_json(c2, "/v1/completions", {{"prompt", "zz"}, {"max_tokens", 1}});
    });
    CHECK(eventually([&] { return !live.problem().empty(); }, Ms(2500)));
    auto h = c.Get("/health");
    check_error(h, 503, "worker_stuck");
    int pings_when_stuck = pings.load();
    std::this_thread::sleep_for(Ms(400));
    CHECK(pings.load() == pings_when_stuck);
    pending.get();
    CHECK(eventually([&] { return live.problem().empty(); }, Ms(3000)));
    CHECK(c.Get("/health")->status == 200);
    server.state.liveness = nullptr;
}

TEST_CASE("an engine I/O error fails the request with a 500 naming the file and marks the model unhealthy") {
    FakeEngineOptions eo;
    eo.io_error = "read failed: /models/tiny/model-00002.safetensors at offset 4096 (8192 bytes): short read";
    TestServer server(test_config(), eo);
    Liveness live([&] { return server.worker->busy(); }, [&] { return server.engine.progress(); });
    server.state.liveness = &live;
    server.on_io_error = [&](const std::string& why) { live.mark_unhealthy(why); };  // as serve_main does
    auto c = server.client();
    auto r = post_json(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}});
    check_error(r, 500);
    CHECK(json::parse(r->body)["error"]["message"].get<std::string>().find("model-00002.safetensors") != std::string::npos);
    auto h = c.Get("/health");
    check_error(h, 503, "model_unhealthy");
    CHECK(json::parse(h->body)["error"]["message"].get<std::string>().find("model-00002.safetensors") != std::string::npos);
    server.state.liveness = nullptr;
}
