// Sampled speculative decoding follows the target distribution: the real daemon on the tiny
// model, many short seeded sampled generations with speculation on (--draft-max 8) and off
// (--draft-max 0), compared at the position where a draft is verified.
//
// The prompt (token ids) is P x1 P x2 ... P xK P: whatever first token t1 the model samples
// among the x's, prompt lookup finds "P t1" earlier and drafts the token that followed it, P,
// for the second token t2, and the verify step decides whether t2 is that draft. So t2's
// distribution is exactly what a wrong acceptance rule changes (accepting drafts always, or
// verifying them greedily, makes P or the argmax far too common). A logit bias on P (the same
// in both runs: part of the target distribution) makes P likely enough for the rule to matter.
// Two checks:
// - the same seed gives the same tokens with and without speculation (the worker's rule: one
//   sampler draw per produced token, compared with the draft);
// - a chi-square test of homogeneity between t2 under speculation (seeds 1..N) and t2 under
//   plain sampling (seeds N+1..2N, independent draws) at significance 0.001. The seeds are
//   fixed, so the outcome is too (no flaky run); a planted "always accept" bug fails both.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "common/daemon.h"
#include "common/model_cache.h"

using namespace k3::test;
using nlohmann::json;

namespace {

constexpr int kRuns = 600;
constexpr int kDraftToken = 65;  // P ("A" in the tiny model's vocabulary)
// Raises P's probability (to about a third at the verified position, from about 1/500 for a
// random-weight model at temperature 1), so that the accept/reject rule matters to many runs.
constexpr double kDraftBias = 5.5;

std::vector<int> prompt_ids() {
    std::vector<int> ids;
    for (int x = 20; x < 500; ++x) {  // every ordinary token of the tiny vocabulary but P
        if (x == kDraftToken) continue;
        ids.push_back(kDraftToken);
        ids.push_back(x);
    }
    ids.push_back(kDraftToken);
    return ids;
}

// The first and second generated tokens' texts of one seeded sampled completion.
std::pair<std::string, std::string> sample(httplib::Client& c, const std::vector<int>& prompt, int seed) {
    const json body = {{"prompt", prompt},   {"max_tokens", 3},     {"temperature", 1.0},
                       {"seed", seed},       {"logprobs", 0},       {"ignore_eos", true},
                       {"logit_bias", {{std::to_string(kDraftToken), kDraftBias}}}};
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    const json tokens = json::parse(r->body)["choices"][0]["logprobs"]["tokens"];
    REQUIRE(tokens.size() >= 2);
    return {tokens[0].get<std::string>(), tokens[1].get<std::string>()};
}

struct Samples {
    std::vector<std::pair<std::string, std::string>> by_seed;  // index = seed - 1
    json speculative;                                          // /slots "speculative"
};

Samples run_daemon(const std::string& draft_max, int n_seeds) {
    DaemonProcess d({cached_model("tiny"), "--port", "0", "--threads", "1", "--parallel", "1", "--draft-max",
                     draft_max, "--prompt-cache-gb", "0.1"});
    auto c = d.client();
    const std::vector<int> prompt = prompt_ids();
    Samples s;
    for (int seed = 1; seed <= n_seeds; ++seed) s.by_seed.push_back(sample(c, prompt, seed));
    auto r = c.Get("/slots");
    REQUIRE(r);
    s.speculative = json::parse(r->body)["speculative"];
    return s;
}

// Chi-square statistic of homogeneity for two samples over the same categories, categories
// with fewer than 10 observations in both samples together pooled into one; *df = categories - 1.
double chi_square(const std::map<std::string, int>& a, const std::map<std::string, int>& b, int* df) {
    std::map<std::string, std::pair<double, double>> cells;
    for (const auto& [k, n] : a) cells[k].first += n;
    for (const auto& [k, n] : b) cells[k].second += n;
    std::vector<std::pair<double, double>> pooled;
    std::pair<double, double> rest{0, 0};
    for (const auto& [k, ab] : cells) {
        if (ab.first + ab.second >= 10)
            pooled.push_back(ab);
        else
            rest = {rest.first + ab.first, rest.second + ab.second};
    }
    if (rest.first + rest.second > 0) pooled.push_back(rest);
    double na = 0, nb = 0;
    for (const auto& ab : pooled) na += ab.first, nb += ab.second;
    double x2 = 0;
    for (const auto& [oa, ob] : pooled) {
        const double col = oa + ob;
        const double ea = col * na / (na + nb), eb = col * nb / (na + nb);
        x2 += (oa - ea) * (oa - ea) / ea + (ob - eb) * (ob - eb) / eb;
    }
    *df = int(pooled.size()) - 1;
    return x2;
}

// Upper 0.001 quantile of chi-square with df degrees of freedom (Wilson-Hilferty; within 1% for
// df >= 3, and conservative enough below).
double critical_value_0001(int df) {
    const double z = 3.0902, k = df;
    const double t = 1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k));
    return k * t * t * t;
}

}  // namespace

TEST_CASE("speculative sampling: same seed same tokens, and the verified token's distribution passes a chi-square test") {
    const Samples spec = run_daemon("8", kRuns);
    const Samples plain = run_daemon("0", 2 * kRuns);

    // drafts were verified at the measured position in most runs
    INFO("speculative: " << spec.speculative.dump());
    CHECK(spec.speculative["drafted"].get<int>() >= kRuns / 2);
    CHECK(plain.speculative["drafted"].get<int>() == 0);

    int identical = 0;
    for (int i = 0; i < kRuns; ++i) identical += spec.by_seed[size_t(i)] == plain.by_seed[size_t(i)] ? 1 : 0;
    CHECK(identical == kRuns);

    std::map<std::string, int> with, without;
    for (int i = 0; i < kRuns; ++i) {
        ++with[spec.by_seed[size_t(i)].second];
        ++without[plain.by_seed[size_t(kRuns + i)].second];
    }
    int df = 0;
    const double x2 = chi_square(with, without, &df);
    INFO("chi-square " << x2 << " with " << df << " degrees of freedom, critical value at 0.001: "
                       << critical_value_0001(std::max(df, 1)));
    REQUIRE(df >= 2);  // the test has something to tell apart
    CHECK(x2 < critical_value_0001(df));
    MESSAGE("t2 categories " << df + 1 << ", chi-square " << x2 << " (critical " << critical_value_0001(df) << ")");
}
