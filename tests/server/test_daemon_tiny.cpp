// The real `k3serve serve` binary on the tiny synthetic model, as a subprocess over loopback:
// completions and chat (streamed and not) agree with each other, usage matches /tokenize,
// seeds reproduce, stop strings cut, state reuse gives the same tokens as a cold run, a
// disconnect cancels, SIGTERM drains (and a second signal exits 130), bad start-up exits 2.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <sys/un.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "common/daemon.h"
#include "common/scratch.h"
#include "common/model_cache.h"
#include "common/wait.h"
#include "post_json.h"

using namespace k3::test;
using nlohmann::json;

namespace {

// Concatenated text of an SSE body (chat deltas or completion texts) and its finish reason.
std::pair<std::string, std::string> stream_text(const std::string& body) {
    std::string text, finish;
    size_t pos = 0;
    while ((pos = body.find("data: ", pos)) != std::string::npos) {
        size_t end = body.find("\n\n", pos);
        std::string data = body.substr(pos + 6, end - pos - 6);
        pos = end;
        if (data == "[DONE]") break;
        json j = json::parse(data);
        REQUIRE_FALSE(j.contains("error"));
        if (j["choices"].empty()) continue;
        const json& c = j["choices"][0];
        text += c.contains("delta") ? c["delta"].value("content", "") : c["text"].get<std::string>();
        if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
    }
    return {text, finish};
}

// The longest generation the daemon accepts for a one-token prompt (its context minus one).
int long_generation(httplib::Client& c) {
    auto r = c.Get("/props");
    REQUIRE(r);
    return json::parse(r->body)["n_ctx"].get<int>() - 2;
}

const json kTurn1 = json::array({{{"role", "user"}, {"content", "Write one sentence about the sea."}}});

}  // namespace

TEST_CASE("serve: --help exits 0, bad usage and a missing model exit 2") {
    std::string bin = env_or_throw("K3SERVE_BIN");
    CHECK(std::system((bin + " serve --help > /dev/null").c_str()) == 0);
    CHECK(WEXITSTATUS(std::system((bin + " serve --bogus 2> /dev/null").c_str())) == 2);
    CHECK(WEXITSTATUS(std::system((bin + " serve 2> /dev/null").c_str())) == 2);
    DaemonProcess missing({"/nonexistent/model-dir", "--port", "0"}, /*wait_ready=*/false);
    CHECK(missing.wait_exit() == 2);
    CHECK(missing.log().find("/nonexistent/model-dir") != std::string::npos);
}

TEST_CASE("tiny model: completions and chat, streamed and not, usage, seeds, stop strings") {
    std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "1"});
    auto c = d.client();
    CHECK(d.log().find("kernels:") != std::string::npos);
    CHECK(d.log().find("memory plan:") != std::string::npos);

    json greedy = {{"prompt", "The capital of France is"}, {"max_tokens", 24}, {"temperature", 0}};
    json a = post(c, "/v1/completions", greedy);
    json b = post(c, "/v1/completions", greedy);
    std::string text = a["choices"][0]["text"];
    CHECK(text == b["choices"][0]["text"]);
    CHECK(a["usage"]["completion_tokens"].get<int>() > 0);
    json tok = post(c, "/tokenize", {{"content", "The capital of France is"}});
    CHECK(a["usage"]["prompt_tokens"] == tok["tokens"].size());
    // A prompt that extends the previous one reuses its evaluated positions.
    json longer = post(c, "/v1/completions", {{"prompt", "The capital of France is Paris, and"}, {"max_tokens", 2}});
    CHECK(longer["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() > 0);

    json s = greedy;
    s["stream"] = true;
    auto r = c.Post("/v1/completions", s.dump(), "application/json");
    REQUIRE(r->status == 200);
    auto [streamed, finish] = stream_text(r->body);
    CHECK(streamed == text);
    CHECK(finish == a["choices"][0]["finish_reason"]);

    // Seeds: same seed, same text.
    json sampled = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0.9}, {"seed", 1234}};
    CHECK(post(c, "/v1/completions", sampled)["choices"][0]["text"] ==
          post(c, "/v1/completions", sampled)["choices"][0]["text"]);

    // A stop string taken from the greedy text (an ASCII character past its first third; a
    // random model writes many non-ASCII bytes) cuts the text at its first occurrence.
    json long_greedy = greedy;
    long_greedy["max_tokens"] = 64;
    text = post(c, "/v1/completions", long_greedy)["choices"][0]["text"];
    greedy = long_greedy;
    size_t at = std::string::npos;
    for (size_t i = text.size() / 3; i < text.size() && at == std::string::npos; ++i)
        if (text[i] > 0x20 && text[i] < 0x7f) at = i;
    REQUIRE(at != std::string::npos);
    std::string stop = text.substr(at, 1);
    json cut = greedy;
    cut["stop"] = stop;
    json j = post(c, "/v1/completions", cut);
    CHECK(j["choices"][0]["text"] == text.substr(0, text.find(stop)));
    CHECK(j["choices"][0]["finish_reason"] == "stop");

    json chat = {{"messages", kTurn1}, {"max_tokens", 24}, {"temperature", 0}};
    json whole = post(c, "/v1/chat/completions", chat);
    CHECK(whole["choices"][0]["message"]["role"] == "assistant");
    chat["stream"] = true;
    auto rs = c.Post("/v1/chat/completions", chat.dump(), "application/json");
    CHECK(stream_text(rs->body).first == whole["choices"][0]["message"]["content"]);

    auto models = c.Get("/v1/models");
    // The alias defaults to the model directory's name.
    CHECK(json::parse(models->body)["data"][0]["id"] == std::filesystem::path(model).filename().string());
    auto props = json::parse(c.Get("/props")->body);
    CHECK_FALSE(props["model"]["fingerprint"].get<std::string>().empty());
    auto metrics = c.Get("/metrics")->body;
    CHECK(metrics.find("k3serve:requests_total{outcome=\"ok\"}") != std::string::npos);
    d.signal(SIGTERM);
    CHECK(d.wait_exit() == 0);
}

TEST_CASE("tiny model: a second chat turn reuses state and gives the same tokens as a cold run") {
    std::string model = cached_model("tiny");
    json turn1 = {{"messages", kTurn1}, {"max_tokens", 16}, {"temperature", 0}};
    json turn2;
    json first, warm_second;
    {
        DaemonProcess warm({model, "--port", "0", "--threads", "1"});
        auto c = warm.client();
        first = post(c, "/v1/chat/completions", turn1);
        turn2 = turn1;
        turn2["messages"].push_back({{"role", "assistant"}, {"content", first["choices"][0]["message"]["content"]}});
        turn2["messages"].push_back({{"role", "user"}, {"content", "And one about the mountains."}});
        turn2["logprobs"] = true;
        turn2["top_logprobs"] = 3;
        warm_second = post(c, "/v1/chat/completions", turn2);
        warm.signal(SIGTERM);
        CHECK(warm.wait_exit() == 0);
    }
    int cached = warm_second["usage"]["prompt_tokens_details"]["cached_tokens"];
    CHECK(cached > first["usage"]["prompt_tokens"].get<int>() / 2);

    DaemonProcess cold({model, "--port", "0", "--threads", "1"});
    auto c = cold.client();
    json cold_second = post(c, "/v1/chat/completions", turn2);
    CHECK(cold_second["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
    CHECK(cold_second["choices"][0]["message"]["content"] == warm_second["choices"][0]["message"]["content"]);
    const json& lw = warm_second["choices"][0]["logprobs"]["content"];
    const json& lc = cold_second["choices"][0]["logprobs"]["content"];
    REQUIRE(lw.size() == lc.size());
    // Reuse promises the bits of a cold run: every logprob (chosen and top 3) is equal exactly,
    // not approximately (JSON carries each float at round-trip precision).
    for (size_t i = 0; i < lw.size(); ++i) {
        CAPTURE(i);
        CHECK(lw[i]["token"] == lc[i]["token"]);
        CHECK(lw[i]["logprob"].get<double>() == lc[i]["logprob"].get<double>());
        CHECK(lw[i]["top_logprobs"] == lc[i]["top_logprobs"]);
        CHECK(lw[i]["top_logprobs"].size() == 3);
    }
}

TEST_CASE("tiny model: SIGTERM drains in-flight requests, refuses new ones, exits 0") {
    std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--drain-timeout-s", "60"});
    std::string body;
    std::thread inflight([&] {
        auto c = d.client();
        json req = {{"prompt", "x"}, {"max_tokens", 400}, {"temperature", 0}, {"stream", true}, {"ignore_eos", true}};
        auto r = c.Post("/v1/completions", req.dump(), "application/json");
        if (r) body = r->body;
    });
    auto c = d.client();
    // Wait until the request is running, then ask the daemon to stop.
    REQUIRE(eventually([&] {
        auto m = c.Get("/metrics");
        return m && m->body.find("llamacpp:requests_processing 1") != std::string::npos;
    }));
    d.signal(SIGTERM);
    REQUIRE(eventually([&] {
        auto h = c.Get("/health");
        return h && h->status == 503;
    }));
    auto refused = c.Post("/v1/completions", json({{"prompt", "y"}}).dump(), "application/json");
    if (refused) CHECK(refused->status == 503);
    inflight.join();
    CHECK(d.wait_exit() == 0);
    auto [text, finish] = stream_text(body);
    CHECK(finish == "length");
    CHECK(body.find("data: [DONE]") != std::string::npos);
    CHECK(d.log().find("shut down cleanly") != std::string::npos);
}

TEST_CASE("tiny model: past the drain timeout the running request is cancelled; a second signal exits 130") {
    std::string model = cached_model("tiny");
    {
        // no speculation: drafted from its own repetitions the whole generation could end
        // before the signal arrives
        DaemonProcess d({model, "--port", "0", "--threads", "1", "--drain-timeout-s", "0", "--draft-max", "0"});
        std::string body;
        std::thread inflight([&] {
            auto c = d.client();
            json req = {{"prompt", "x"}, {"max_tokens", long_generation(c)}, {"stream", true}, {"ignore_eos", true}};
            auto r = c.Post("/v1/completions", req.dump(), "application/json");
            if (r) body = r->body;
        });
        auto c = d.client();
        REQUIRE(eventually([&] {
            auto m = c.Get("/metrics");
            return m && m->body.find("llamacpp:requests_processing 1") != std::string::npos;
        }));
        d.signal(SIGTERM);
        CHECK(d.wait_exit() == 0);
        inflight.join();
        INFO("body: " << body.substr(body.size() > 600 ? body.size() - 600 : 0));
        CHECK(body.find("shutting_down") != std::string::npos);
    }
    {
        DaemonProcess d({model, "--port", "0", "--threads", "1", "--drain-timeout-s", "600"});
        std::thread inflight([&] {
            auto c = d.client();
            json req = {{"prompt", "x"}, {"max_tokens", long_generation(c)}, {"stream", true}, {"ignore_eos", true}};
            c.Post("/v1/completions", req.dump(), "application/json");
        });
        auto c = d.client();
        REQUIRE(eventually([&] {
            auto m = c.Get("/metrics");
            return m && m->body.find("llamacpp:requests_processing 1") != std::string::npos;
        }));
        d.signal(SIGTERM);
        REQUIRE(eventually([&] { return d.log().find("shutting down") != std::string::npos; }));
        d.signal(SIGINT);
        CHECK(d.wait_exit() == 130);
        inflight.join();
    }
}

TEST_CASE("tiny model: a client that disconnects cancels its generation") {
    std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "1"});
    auto c = d.client();
    int max_tokens = long_generation(c);
    {
        httplib::Client impatient("127.0.0.1", d.port());
        impatient.set_read_timeout(0, 300000);  // give up (and hang up) after 0.3 s
        json req = {{"prompt", "x"}, {"max_tokens", max_tokens}, {"ignore_eos", true}};
        auto r = impatient.Post("/v1/completions", req.dump(), "application/json");
        CHECK_FALSE(r);
    }
    REQUIRE(eventually([&] {
        auto m = c.Get("/metrics");
        return m && m->body.find("k3serve:requests_total{outcome=\"cancelled\"} 1") != std::string::npos &&
               m->body.find("llamacpp:requests_processing 0") != std::string::npos;
    }));
    post(c, "/v1/completions", {{"prompt", "still serving"}, {"max_tokens", 2}});
}

TEST_CASE("tiny model: sd_notify STATUS/READY/WATCHDOG/STOPPING, and JSON log lines") {
    std::string model = cached_model("tiny");
    // A datagram socket standing in for systemd's $NOTIFY_SOCKET.
    std::string path = (scratch_dir("notify") / "notify.sock").string();
    std::filesystem::remove(path);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    setenv("NOTIFY_SOCKET", path.c_str(), 1);
    setenv("WATCHDOG_USEC", "400000", 1);  // as systemd sets it for WatchdogSec=0.4
    std::string messages;
    {
        DaemonProcess d({model, "--port", "0", "--threads", "1", "--log-format", "json"});
        unsetenv("NOTIFY_SOCKET");
        unsetenv("WATCHDOG_USEC");
        timeval tv{0, 200000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        char buf[4096];
        ssize_t n;
        auto receive = [&] {
            while ((n = recv(fd, buf, sizeof buf, 0)) > 0) messages += std::string(buf, size_t(n)) + "\n";
        };
        // The watchdog must keep pinging while the daemon is idle, not just once at start-up:
        // wait (bounded) for a second WATCHDOG=1, which comes about a second after the first.
        auto pings = [&] {
            size_t count = 0;
            for (size_t at = messages.find("WATCHDOG=1"); at != std::string::npos; at = messages.find("WATCHDOG=1", at + 1))
                ++count;
            return count;
        };
        CHECK(eventually([&] { receive(); return pings() >= 2; }, std::chrono::seconds(30)));
        d.signal(SIGTERM);
        CHECK(d.wait_exit() == 0);
        receive();
        std::istringstream lines(d.log());
        std::string line;
        int n_lines = 0;
        while (std::getline(lines, line)) {
            CAPTURE(line);
            json j = json::parse(line);  // every log line is one JSON object
            CHECK(j.contains("time"));
            CHECK(j.contains("level"));
            CHECK(j.contains("msg"));
            ++n_lines;
        }
        CHECK(n_lines >= 5);
    }
    close(fd);
    std::filesystem::remove(path);
    CAPTURE(messages);
    CHECK(messages.find("STATUS=loading") != std::string::npos);
    CHECK(messages.find("READY=1") != std::string::npos);
    CHECK(messages.find("STOPPING=1") != std::string::npos);
    CHECK(messages.find("READY=1") < messages.find("STOPPING=1"));
}
