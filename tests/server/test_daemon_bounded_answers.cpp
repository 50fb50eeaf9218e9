// Bounded answers (issue 21, row 6; docs/operations.md "Bounded answers"): the real `k3serve
// serve` on the tiny model over loopback. A non-streamed request whose whole answer could pass
// --max-answer-mb is refused before it runs, with a 400 that names the limit and the largest
// max_tokens that fits; that max_tokens, or the same request streamed, is served, and the answer
// stays within the limit.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "common/daemon.h"
#include "common/model_cache.h"
#include "post_json.h"

using namespace k3::test;
using nlohmann::json;

namespace {

// The max_tokens a refusal says fits ("at most M fit"), or -1.
int fitting_max_tokens(const std::string& message) {
    std::smatch m;
    if (!std::regex_search(message, m, std::regex("at most ([0-9]+) fit"))) return -1;
    return std::stoi(m[1]);
}

}  // namespace

TEST_CASE("tiny model: a whole answer that could pass --max-answer-mb is a 400 naming the limit; the max_tokens it names, or a stream, is served") {
    std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--draft-max", "0", "--max-answer-mb", "1"});
    auto c = d.client();
    // 16 choices x 256 tokens, each with 20 alternatives: several MiB at the tiny vocabulary's
    // longest token, over the 1 MiB limit.
    json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"n", 16}, {"max_tokens", 256},
                 {"logprobs", true}, {"top_logprobs", 20}, {"ignore_eos", true}, {"temperature", 1}};
    json error = post(c, "/v1/chat/completions", chat, 400)["error"];
    INFO(error.dump());
    CHECK(error["code"] == "answer_too_large");
    CHECK(error["param"] == "max_tokens");
    const std::string message = error["message"];
    CHECK(message.find("--max-answer-mb, 1.0 MiB") != std::string::npos);
    CHECK(message.find("\"stream\": true") != std::string::npos);
    const int fit = fitting_max_tokens(message);
    REQUIRE(fit > 0);
    REQUIRE(fit < 256);

    // The max_tokens it names is served within the limit (a chat choice may end early, at the
    // end of its turn).
    chat["max_tokens"] = fit;
    auto whole = c.Post("/v1/chat/completions", chat.dump(), "application/json");
    REQUIRE(whole);
    REQUIRE(whole->status == 200);
    CHECK(whole->body.size() <= size_t(1) << 20);
    json body = json::parse(whole->body);
    REQUIRE(body["choices"].size() == 16);
    for (const auto& choice : body["choices"]) {
        CHECK(choice["logprobs"]["content"].size() >= 1);
        CHECK(choice["logprobs"]["content"].size() <= size_t(fit));
    }

    // The refused request streamed is not bound by it.
    chat["max_tokens"] = 256;
    chat["stream"] = true;
    auto streamed = c.Post("/v1/chat/completions", chat.dump(), "application/json");
    REQUIRE(streamed);
    CHECK(streamed->status == 200);
    CHECK(streamed->body.find("data: [DONE]") != std::string::npos);
    CHECK(streamed->body.find("\"error\"") == std::string::npos);

    // Completions: the same rule in its own layout (logprobs 5).
    json completion = {{"prompt", "x"}, {"n", 16}, {"max_tokens", 1024}, {"logprobs", 5}};
    auto refused_completion = c.Post("/v1/completions", completion.dump(), "application/json");
    REQUIRE(refused_completion);
    CHECK(refused_completion->status == 400);
    CHECK(json::parse(refused_completion->body)["error"]["code"] == "answer_too_large");
    // ... and its fitting max_tokens, every choice to the last token, within the limit.
    const int completion_fit = fitting_max_tokens(json::parse(refused_completion->body)["error"]["message"]);
    REQUIRE(completion_fit > 0);
    completion["max_tokens"] = completion_fit;
    completion["ignore_eos"] = true;
    auto whole_completion = c.Post("/v1/completions", completion.dump(), "application/json");
    REQUIRE(whole_completion);
    REQUIRE(whole_completion->status == 200);
    CHECK(whole_completion->body.size() <= size_t(1) << 20);
    MESSAGE("completions n 16 x " << completion_fit << " tokens, logprobs 5: " << whole_completion->body.size()
                                  << " bytes of a 1 MiB limit");
    for (const auto& choice : json::parse(whole_completion->body)["choices"]) {
        CHECK(choice["finish_reason"] == "length");
        CHECK(choice["logprobs"]["tokens"].size() == size_t(completion_fit));
    }
    completion["max_tokens"] = 1024;
    completion["stream"] = true;
    auto streamed_completion = c.Post("/v1/completions", completion.dump(), "application/json");
    REQUIRE(streamed_completion);
    CHECK(streamed_completion->status == 200);
    CHECK(streamed_completion->body.find("data: [DONE]") != std::string::npos);

    // Without logprobs a whole answer of the same n and max_tokens fits.
    completion.erase("logprobs");
    completion.erase("stream");
    completion["max_tokens"] = 64;
    auto plain = c.Post("/v1/completions", completion.dump(), "application/json");
    REQUIRE(plain);
    CHECK(plain->status == 200);
}
