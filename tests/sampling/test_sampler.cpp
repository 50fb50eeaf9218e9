// Sampling: greedy default, parameter validation, determinism by seed, and chi-square checks
// that sampled frequencies follow the intended distribution under each truncation. The seed
// is fixed, so the statistics are deterministic: a pass cannot turn into a flake.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "k3/sampler.h"
#include "k3/error.h"

using namespace k3;

namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.5f, -1.0f, 0.0f, 2.0f, 0.5f, 1.5f};

// The intended distribution, computed here independently in double precision: softmax at
// temperature T, then top_k, then top_p over what is left, then min_p against the maximum.
std::vector<double> intended(const std::vector<float>& logits, const SamplingParams& p) {
    const size_t n = logits.size();
    std::vector<double> prob(n);
    double mx = *std::max_element(logits.begin(), logits.end()) / p.temperature;
    for (size_t i = 0; i < n; ++i) prob[i] = std::exp(logits[i] / p.temperature - mx);
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return prob[a] > prob[b]; });
    size_t keep = p.top_k > 0 ? std::min<size_t>(p.top_k, n) : n;
    double mass = 0;
    for (size_t r = 0; r < keep; ++r) mass += prob[order[r]];
    if (p.top_p < 1.0f) {
        double acc = 0;
        size_t r = 0;
        while (r < keep) {
            acc += prob[order[r++]];
            if (acc >= p.top_p * mass) break;
        }
        keep = r;
    }
    while (keep > 1 && prob[order[keep - 1]] < p.min_p * prob[order[0]]) --keep;
    std::vector<double> out(n, 0.0);
    double total = 0;
    for (size_t r = 0; r < keep; ++r) total += prob[order[r]];
    for (size_t r = 0; r < keep; ++r) out[order[r]] = prob[order[r]] / total;
    return out;
}

// Chi-square statistic of `draws` samples against `expected`; ids with expected 0 must never
// be drawn (returned through `impossible`).
double chi_square(const SamplingParams& p, const std::vector<double>& expected, int draws, int& impossible, int& dof) {
    Sampler sampler(p);
    std::vector<int> counts(expected.size(), 0);
    for (int i = 0; i < draws; ++i) counts[sampler.sample(kLogits)]++;
    double chi2 = 0;
    impossible = 0;
    dof = -1;
    for (size_t i = 0; i < expected.size(); ++i) {
        if (expected[i] == 0) {
            impossible += counts[i];
            continue;
        }
        ++dof;
        double e = expected[i] * draws;
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    return chi2;
}

// Upper 0.1% points of the chi-square distribution by degrees of freedom.
double chi2_critical_999(int dof) {
    static const double table[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12};
    return table[dof];
}

}  // namespace

TEST_CASE("greedy is the default and picks the lowest id among equal maxima") {
    SamplingParams p;
    CHECK(validate(p).empty());
    Sampler s(p);
    CHECK(s.sample(kLogits) == 1);
    std::vector<float> tie = {0.0f, 5.0f, 1.0f, 5.0f};
    CHECK(s.sample(tie) == 1);
    std::vector<float> with_nan = {NAN, 2.0f, 1.0f};
    CHECK(s.sample(with_nan) == 1);
}

TEST_CASE("greedy_token: NaN never wins over a number, ties go to the lowest id, -inf is a number") {
    const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
    CHECK(greedy_token(std::vector<float>{nan, 1.0f, 2.0f, 2.0f}) == 2);  // a NaN first does not stick
    CHECK(greedy_token(std::vector<float>{1.0f, nan, 0.5f}) == 0);        // a NaN later is skipped
    CHECK(greedy_token(std::vector<float>{nan, nan, nan}) == 0);
    CHECK(greedy_token(std::vector<float>{nan, -inf, -inf}) == 1);
    CHECK(greedy_token(std::vector<float>{}) == 0);
    CHECK(greedy_token(std::vector<float>{-1.0f, inf, inf, nan}) == 1);
    // The sampler's greedy choice is this one, NaN included.
    Sampler greedy(SamplingParams{});
    CHECK(greedy.sample(std::vector<float>{nan, 1.0f, 3.0f, 3.0f}) == 2);
}

TEST_CASE("out-of-range parameters are refused with the parameter and range") {
    auto err = [](SamplingParams p) { return validate(p); };
    CHECK(err({-0.1f}).find("temperature must be between 0 (greedy) and 100 (got -0.1)") != std::string::npos);
    CHECK(err({NAN}).find("temperature") != std::string::npos);
    CHECK(err({101.0f}).find("temperature") != std::string::npos);
    CHECK(err({1.0f, -1}).find("top_k must be >= 0") != std::string::npos);
    CHECK(err({1.0f, 0, 0.0f}).find("top_p must be in (0, 1]") != std::string::npos);
    CHECK(err({1.0f, 0, 1.5f}).find("top_p") != std::string::npos);
    CHECK(err({1.0f, 0, 1.0f, 1.0f}).find("min_p must be in [0, 1)") != std::string::npos);
    CHECK(err({1.0f, 0, 1.0f, -0.5f}).find("min_p") != std::string::npos);
    CHECK(err({0.7f, 40, 0.9f, 0.05f, 7}).empty());
    CHECK_THROWS_AS(Sampler(SamplingParams{-1.0f}), Error);
}

TEST_CASE("the same seed gives the same tokens; another seed gives others") {
    std::vector<float> logits(1000);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(float(i) * 0.37f) * 4.0f;
    auto run = [&](SamplingParams p) {
        Sampler s(p);
        std::vector<int32_t> ids;
        for (int i = 0; i < 200; ++i) ids.push_back(s.sample(logits));
        return ids;
    };
    for (SamplingParams p : {SamplingParams{1.0f, 0, 1.0f, 0.0f, 42}, SamplingParams{0.8f, 50, 0.9f, 0.02f, 42},
                             SamplingParams{1.3f, 0, 0.95f, 0.0f, 42}}) {
        CHECK(run(p) == run(p));
        SamplingParams other = p;
        other.seed = 43;
        CHECK(run(p) != run(other));
    }
}

TEST_CASE("sampled frequencies follow the intended distribution (chi-square, fixed seed)") {
    struct Case {
        const char* name;
        SamplingParams params;
    };
    const Case cases[] = {
        {"temperature 1", {1.0f, 0, 1.0f, 0.0f, 1}},
        {"temperature 0.5", {0.5f, 0, 1.0f, 0.0f, 2}},
        {"temperature 2", {2.0f, 0, 1.0f, 0.0f, 3}},
        {"top_k 3", {1.0f, 3, 1.0f, 0.0f, 4}},
        {"top_p 0.8", {1.0f, 0, 0.8f, 0.0f, 5}},
        {"min_p 0.3", {1.0f, 0, 1.0f, 0.3f, 6}},
        {"top_k 5 + top_p 0.9 + min_p 0.1 at T 0.7", {0.7f, 5, 0.9f, 0.1f, 7}},
    };
    constexpr int kDraws = 200000;
    for (const auto& c : cases) {
        const std::string name = c.name;
        CAPTURE(name);
        auto expected = intended(kLogits, c.params);
        int impossible = 0, dof = 0;
        double chi2 = chi_square(c.params, expected, kDraws, impossible, dof);
        MESSAGE(name << ": chi2 " << chi2 << " with " << dof << " degrees of freedom");
        CHECK(impossible == 0);
        REQUIRE(dof >= 1);
        CHECK(chi2 < chi2_critical_999(dof));
    }
    // The truncations do cut: top_k 3 leaves 3 ids, min_p 0.3 at T 1 leaves those within
    // ln(1/0.3) of the best logit.
    auto k3 = intended(kLogits, {1.0f, 3, 1.0f, 0.0f, 0});
    CHECK(std::count_if(k3.begin(), k3.end(), [](double p) { return p > 0; }) == 3);
    auto mp = intended(kLogits, {1.0f, 0, 1.0f, 0.3f, 0});
    CHECK(std::count_if(mp.begin(), mp.end(), [](double p) { return p > 0; }) == 3);
}

TEST_CASE("a wrong sampler is caught by the chi-square test") {
    // Teeth: frequencies at temperature 1 do not pass as the temperature-2 distribution.
    auto wrong = intended(kLogits, {2.0f, 0, 1.0f, 0.0f, 0});
    int impossible = 0, dof = 0;
    double chi2 = chi_square({1.0f, 0, 1.0f, 0.0f, 1}, wrong, 200000, impossible, dof);
    CHECK(chi2 > 10 * chi2_critical_999(dof));
}

TEST_CASE("top_p over a large vocabulary sorts only a prefix and stays exact") {
    // 100k ids where a few dominate: the nucleus is small and must be found without error.
    std::vector<float> logits(100000, -10.0f);
    logits[70000] = 5.0f, logits[3] = 4.0f, logits[99999] = 4.0f;
    Sampler s({1.0f, 0, 0.5f, 0.0f, 9});
    for (int i = 0; i < 100; ++i) CHECK(s.sample(logits) == 70000);  // p(70000) ~ 0.58 >= 0.5
    Sampler wide({1.0f, 0, 0.99f, 0.0f, 9});
    std::map<int32_t, int> seen;
    for (int i = 0; i < 2000; ++i) seen[wide.sample(logits)]++;
    CHECK(seen.count(3) == 1);
    CHECK(seen.count(99999) == 1);
}

TEST_CASE("logprob is the temperature-scaled log-softmax") {
    Sampler greedy(SamplingParams{});
    double sum = 0;
    for (float l : kLogits) sum += std::exp(l);
    CHECK(greedy.logprob(kLogits, 1) == doctest::Approx(3.0 - std::log(sum)).epsilon(1e-6));
    Sampler hot({2.0f});
    double sum2 = 0;
    for (float l : kLogits) sum2 += std::exp(l / 2.0);
    CHECK(hot.logprob(kLogits, 4) == doctest::Approx(0.0 - std::log(sum2)).epsilon(1e-6));
    double total = 0;
    for (int32_t i = 0; i < int32_t(kLogits.size()); ++i) total += std::exp(hot.logprob(kLogits, i));
    CHECK(total == doctest::Approx(1.0));
    CHECK_THROWS_AS(hot.logprob(kLogits, 8), Error);
}
