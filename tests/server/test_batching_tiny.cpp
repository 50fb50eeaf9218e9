// The real daemon with --parallel 4 on the tiny model: four concurrent greedy streams give the
// text each gives alone (they run batched: /slots counts batched decode tokens); a client that
// leaves mid-generation does not disturb the others; the same prompt again is resumed whole
// from the shared prompt cache (usage.prompt_tokens_details.cached_tokens), also after other
// requests ran; /slots and /metrics describe the slots and the prompt cache.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "common/daemon.h"
#include "common/model_cache.h"
#include "common/wait.h"

using namespace k3::test;
using nlohmann::json;

namespace {

json post(httplib::Client& c, const json& body) {
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    return json::parse(r->body);
}

// Concatenated text of an SSE completion stream.
std::string stream_text(const std::string& body) {
    std::string text;
    size_t pos = 0;
    while ((pos = body.find("data: ", pos)) != std::string::npos) {
        const size_t end = body.find("\n\n", pos);
        const std::string data = body.substr(pos + 6, end - pos - 6);
        pos = end;
        if (data == "[DONE]") break;
        const json j = json::parse(data);
        REQUIRE_FALSE(j.contains("error"));
        if (!j["choices"].empty()) text += j["choices"][0]["text"].get<std::string>();
    }
    return text;
}

json request(const std::string& prompt, bool stream) {
    return {{"prompt", prompt}, {"max_tokens", 60}, {"temperature", 0}, {"ignore_eos", true}, {"stream", stream}};
}

json get_json(httplib::Client& c, const char* path) {
    auto r = c.Get(path);
    REQUIRE(r);
    REQUIRE(r->status == 200);
    return json::parse(r->body);
}

}  // namespace

TEST_CASE("parallel 4: concurrent streams give the text of each alone; a leaving client disturbs nobody") {
    const std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "2", "--parallel", "4", "--http-threads", "12"});
    auto c = d.client();
    const std::vector<std::string> prompts = {"The sea", "A long time ago in a land far away", "Numbers: 1 2 3",
                                              "x"};
    std::vector<std::string> alone;
    for (const auto& p : prompts) alone.push_back(post(c, request(p, false))["choices"][0]["text"]);

    std::vector<std::string> together(prompts.size());
    std::vector<std::thread> clients;
    for (size_t i = 0; i < prompts.size(); ++i)
        clients.emplace_back([&, i] {
            auto ci = d.client();
            auto r = ci.Post("/v1/completions", request(prompts[i], true).dump(), "application/json");
            if (r && r->status == 200) together[i] = stream_text(r->body);
        });
    // A fifth client asks for a long generation and hangs up after 0.3 s.
    clients.emplace_back([&] {
        httplib::Client impatient("127.0.0.1", d.port());
        impatient.set_read_timeout(0, 300000);
        json req = request("impatient", false);
        req["max_tokens"] = 400;
        impatient.Post("/v1/completions", req.dump(), "application/json");
    });
    for (auto& t : clients) t.join();
    for (size_t i = 0; i < prompts.size(); ++i) CHECK_MESSAGE(together[i] == alone[i], "prompt " << i);

    REQUIRE(eventually([&] { return get_json(c, "/slots")["steps"].get<int>() > 0; }));
    const json slots = get_json(c, "/slots");
    CHECK(slots["slots"].size() == 4);
    CHECK(slots["steps"].get<int>() > 0);
    CHECK(slots["batched_decode_tokens"].get<int>() > 0);
    CHECK(get_json(c, "/props")["total_slots"] == 4);
}

TEST_CASE("parallel 4: the prompt cache resumes a prompt seen before, also after other requests ran") {
    const std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--parallel", "2", "--prompt-cache-gb", "0.2"});
    auto c = d.client();
    const std::string prompt = "Once upon a time there was a lighthouse keeper who";
    const json first = post(c, request(prompt, false));
    CHECK(first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
    // other prompts in between, two at once
    std::thread t1([&] { auto ci = d.client(); post(ci, request("Something else entirely", false)); });
    std::thread t2([&] { auto ci = d.client(); post(ci, request("And yet another prompt", false)); });
    t1.join();
    t2.join();
    const json again = post(c, request(prompt, false));
    CHECK(again["usage"]["prompt_tokens_details"]["cached_tokens"] == again["usage"]["prompt_tokens"]);
    CHECK(again["choices"][0]["text"] == first["choices"][0]["text"]);

    // the board is published right after the response went out
    REQUIRE(eventually([&] { return get_json(c, "/slots")["prompt_cache"]["hits"].get<int>() >= 1; }));
    const json slots = get_json(c, "/slots");
    const json& pc = slots["prompt_cache"];
    CHECK(pc["bytes"].get<int64_t>() > 0);
    CHECK(pc["bytes"].get<int64_t>() <= pc["budget_bytes"].get<int64_t>());
    CHECK(pc["entries"].size() >= 1);
    auto m = c.Get("/metrics");
    REQUIRE(m);
    CHECK(m->body.find("k3serve:prompt_cache_hits_total") != std::string::npos);
    CHECK(m->body.find("k3serve:prompt_cache_bytes") != std::string::npos);
}
