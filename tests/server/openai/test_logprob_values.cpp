// Logprob values against a reference computed here from the FakeEngine's known logits (the
// scripted token 10, the byte after it 9, every other id 0): the chosen token's log-softmax at
// temperature 1 whatever the sampling settings, and the top alternatives most likely first
// (ties to the lower id), in both the completions and the chat layout.
#include <doctest/doctest.h>

#include <cmath>

#include "server_harness.h"

using namespace k3::test;

namespace {

json body_of(const httplib::Result& r) {
    REQUIRE(r);
    REQUIRE(r->status == 200);
    return json::parse(r->body);
}

// log-softmax of the fake's logits at the scripted token, in long double.
double scripted_logprob(int n_vocab) {
    long double z = std::exp(10.0L) + std::exp(9.0L) + (long double)(n_vocab - 2);
    return double(10.0L - std::log(z));
}

}  // namespace

TEST_CASE("logprobs: the chosen token's value is the model's log-softmax at temperature 1, after any sampling settings") {
    TestServer server;
    const int n_vocab = server.engine.info().n_vocab;
    const double expected = scripted_logprob(n_vocab);
    auto c = server.client();
    // Greedy, and sampled at another temperature with top_k 1 (the same tokens): the same values.
    for (json sampling : {json{{"temperature", 0}}, json{{"temperature", 0.5}, {"top_k", 1}, {"seed", 3}}}) {
        CAPTURE(sampling.dump());
        json req = {{"prompt", "x"}, {"max_tokens", 3}, {"logprobs", 2}};
        req.update(sampling);
        json j = body_of(post_json(c, "/v1/completions", req));
        const json& lp = j["choices"][0]["logprobs"];
        REQUIRE(lp["tokens"] == json::array({"T", "h", "e"}));
        for (size_t i = 0; i < 3; ++i) {
            CAPTURE(i);
            CHECK(lp["token_logprobs"][i].get<double>() == doctest::Approx(expected).epsilon(1e-6));
            // The two alternatives: the chosen one and the byte after it, one nat apart.
            const json& top = lp["top_logprobs"][i];
            REQUIRE(top.size() == 2);
            std::string chosen = lp["tokens"][i], after(1, char(chosen[0] + 1));
            REQUIRE(top.contains(chosen));
            REQUIRE(top.contains(after));
            CHECK(top[chosen].get<double>() == doctest::Approx(expected).epsilon(1e-6));
            CHECK(top[after].get<double>() == doctest::Approx(expected - 1).epsilon(1e-6));
        }
    }
}

TEST_CASE("logprobs: chat top alternatives come most likely first, ties to the lower id") {
    FakeEngineOptions o;
    o.script = chat_answer("Hey");
    TestServer server(test_config(), o);
    const double expected = scripted_logprob(server.engine.info().n_vocab);
    auto c = server.client();
    json k = body_of(post_json(c, "/v1/chat/completions",
                               {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"thinking", false},
                                {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 4}}));
    const json& content = k["choices"][0]["logprobs"]["content"];
    REQUIRE(content.size() >= 3);
    for (size_t i = 0; i < 3; ++i) {
        CAPTURE(i);
        const json& t = content[i];
        const std::string token = t["token"];
        REQUIRE(token.size() == 1);
        CHECK(t["logprob"].get<double>() == doctest::Approx(expected).epsilon(1e-6));
        const json& top = t["top_logprobs"];
        REQUIRE(top.size() == 4);
        CHECK(top[0]["token"] == token);
        CHECK(top[0]["logprob"].get<double>() == doctest::Approx(expected).epsilon(1e-6));
        CHECK(top[1]["token"] == std::string(1, char(token[0] + 1)));
        CHECK(top[1]["logprob"].get<double>() == doctest::Approx(expected - 1).epsilon(1e-6));
        // Then the ids at logit 0, lowest first: bytes 0 and 1.
        CHECK(top[2]["bytes"] == json::array({0}));
        CHECK(top[3]["bytes"] == json::array({1}));
        CHECK(top[2]["logprob"].get<double>() == doctest::Approx(expected - 10).epsilon(1e-6));
        for (size_t a = 1; a < top.size(); ++a) CHECK(top[a - 1]["logprob"].get<double>() >= top[a]["logprob"].get<double>());
    }
    CHECK(content[0]["token"] == "H");
}
