// The real `k3serve serve` on the tiny model over loopback, driven byte by byte: a request is
// judged on its head (Host, Content-Type, API key) before any of its body is read or "100
// Continue" invited, request bodies in flight share one budget, HTTP/1.1 framing follows RFC
// 9112 (Host, Transfer-Encoding, chunk sizes), and HEAD is answered on every GET route.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "common/daemon.h"
#include "common/loopback_socket.h"
#include "common/model_cache.h"
#include "common/wait.h"

using namespace k3::test;
using nlohmann::json;

namespace {

const std::string kCompletion = R"({"prompt": "hi", "max_tokens": 2, "temperature": 0})";

// A POST head announcing `length` body bytes; the body is the caller's to send (or not).
std::string head_only(const std::string& path, size_t length, const std::string& headers) {
    return "POST " + path + " HTTP/1.1\r\n" + headers + "Content-Length: " + std::to_string(length) + "\r\n\r\n";
}

// What the daemon answers to `bytes` sent on a fresh connection (read to the first final head).
std::string exchange(int port, const std::string& bytes) {
    LoopbackSocket s(port);
    REQUIRE(s.ok());
    REQUIRE(s.send(bytes));
    return s.read_until("\r\n\r\n");
}

}  // namespace

TEST_CASE("tiny model: a request is judged on its head: no key, a foreign Host or a non-JSON type is refused before its body, and no 100 Continue") {
    std::string model = cached_model("tiny");
    DaemonProcess keyed({model, "--port", "0", "--threads", "1", "--api-key", "sesame"});
    const size_t big = 8u << 20;  // the body limit: a client that would send it, and never does
    const std::string json_type = "Host: 127.0.0.1\r\nContent-Type: application/json\r\n";
    for (bool expect : {true, false}) {
        CAPTURE(expect);
        LoopbackSocket s(keyed.port());
        REQUIRE(s.ok());
        REQUIRE(s.send(head_only("/v1/completions", big, json_type + (expect ? "Expect: 100-continue\r\n" : ""))));
        const std::string& got = s.read_until("\r\n\r\n");
        CHECK(got.rfind("HTTP/1.1 401 ", 0) == 0);  // the first thing it hears: no Continue
        CHECK(got.find("100 Continue") == std::string::npos);
        s.read_to_close();
        CHECK(s.closed());  // the body is never read: the connection ends
    }
    // The right key on a non-JSON body: 415 from the head alone.
    CHECK(LoopbackSocket::status_of(exchange(keyed.port(), head_only("/v1/completions", big,
                                                                     "Host: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                                                                     "Authorization: Bearer sesame\r\n"))) == 415);
    // With the key and JSON, Continue comes first and then the answer.
    {
        LoopbackSocket s(keyed.port());
        REQUIRE(s.send(head_only("/v1/completions", kCompletion.size(),
                                 json_type + "Authorization: Bearer sesame\r\nExpect: 100-continue\r\n")));
        CHECK(s.read_until("\r\n\r\n").rfind("HTTP/1.1 100 Continue\r\n\r\n", 0) == 0);
        REQUIRE(s.send(kCompletion));
        CHECK(LoopbackSocket::status_of(s.read_until("\"usage\"")) == 200);
    }
    // A loopback daemon without a key answers loopback names only: a foreign Host is refused at
    // the head too.
    DaemonProcess open({model, "--port", "0", "--threads", "1"});
    CHECK(LoopbackSocket::status_of(exchange(open.port(), head_only("/v1/completions", big,
                                                                    "Host: evil.example\r\nContent-Type: application/json\r\n"))) == 403);
}

TEST_CASE("tiny model: request bodies in flight share one budget: past it a head gets 503 + Retry-After, and room comes back") {
    std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--max-inflight-body-mb", "1"});
    // A valid completion padded with whitespace to 700 KB: two do not fit in 1 MiB.
    const std::string body = kCompletion + std::string(700'000 - kCompletion.size(), ' ');
    const std::string headers = "Host: 127.0.0.1\r\nContent-Type: application/json\r\n";
    LoopbackSocket first(d.port());
    REQUIRE(first.send(head_only("/v1/completions", body.size(), headers + "Expect: 100-continue\r\n")));
    // The head was admitted once Continue comes back: its 700 KB are reserved.
    REQUIRE(first.read_until("\r\n\r\n").rfind("HTTP/1.1 100 Continue", 0) == 0);
    const std::string refused = exchange(d.port(), head_only("/v1/completions", body.size(), headers));
    CHECK(LoopbackSocket::status_of(refused) == 503);
    CHECK(refused.find("Retry-After: ") != std::string::npos);
    // Small requests still fit beside it.
    auto c = d.client();
    auto small = c.Post("/v1/completions", kCompletion, "application/json");
    REQUIRE(small);
    CHECK(small->status == 200);
    // The first body arrives and is served; its share is given back.
    REQUIRE(first.send(body));
    CHECK(LoopbackSocket::status_of(first.read_until("\"usage\"")) == 200);
    auto second = c.Post("/v1/completions", body, "application/json");
    REQUIRE(second);
    CHECK(second->status == 200);
}

TEST_CASE("tiny model: HTTP/1.1 framing per RFC 9112: Host rules, repeated Transfer-Encoding, strict chunk sizes") {
    std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "1"});
    const int port = d.port();
    auto status = [&](const std::string& bytes) { return LoopbackSocket::status_of(exchange(port, bytes)); };
    // Host: exactly one in HTTP/1.1, never two, never a path or spaces.
    CHECK(status("GET /health HTTP/1.1\r\n\r\n") == 400);
    CHECK(status("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n") == 400);
    CHECK(status("GET /health HTTP/1.1\r\nHost: 127.0.0.1/x\r\n\r\n") == 400);
    CHECK(status("GET /health HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n") == 200);
    CHECK(status("GET /health HTTP/1.0\r\n\r\n") == 200);  // 1.0 needs none
    const std::string json_head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
    auto chunked = [&](const std::string& size_line) {
        return size_line + "\r\n" + kCompletion + "\r\n0\r\n\r\n";
    };
    char size_hex[16];
    std::snprintf(size_hex, sizeof size_hex, "%zx", kCompletion.size());
    // A second Transfer-Encoding line counts: "chunked" twice, or another coding after it.
    CHECK(status(json_head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(size_hex)) == 400);
    CHECK(status(json_head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n" + chunked(size_hex)) == 501);
    CHECK(status(json_head + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n" + chunked(size_hex)) == 400);
    // A chunk size is hex digits, then only extensions.
    CHECK(status(json_head + "Transfer-Encoding: chunked\r\n\r\n" + chunked(std::string(size_hex) + " junk")) == 400);
    CHECK(status(json_head + "Transfer-Encoding: chunked\r\n\r\n" + chunked(std::string(size_hex) + "g")) == 400);
    CHECK(status(json_head + "Transfer-Encoding: chunked\r\n\r\n" + chunked(std::string(size_hex) + " ;ext=1")) == 200);
    CHECK(status(json_head + "Transfer-Encoding: chunked\r\n\r\n" + chunked(size_hex)) == 200);
}

TEST_CASE("tiny model: HEAD is answered on every GET route with the GET's head and no body") {
    std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "1"});
    auto c = d.client();
    for (const char* path : {"/health", "/v1/health", "/metrics", "/v1/models", "/props", "/slots", "/v1/status", "/"}) {
        CAPTURE(path);
        auto get = c.Get(path);
        REQUIRE(get);
        REQUIRE(get->status == 200);
        LoopbackSocket s(d.port());
        REQUIRE(s.send(std::string("HEAD ") + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
        const std::string& got = s.read_to_close();
        CHECK(LoopbackSocket::status_of(got) == 200);
        const size_t end = got.find("\r\n\r\n");
        REQUIRE(end != std::string::npos);
        CHECK(got.size() == end + 4);  // no body
        CHECK(got.find("Content-Type: " + get->get_header_value("Content-Type")) != std::string::npos);
    }
    // A route without GET says so.
    LoopbackSocket s(d.port());
    REQUIRE(s.send("HEAD /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
    const std::string& got = s.read_to_close();
    CHECK(LoopbackSocket::status_of(got) == 405);
}
