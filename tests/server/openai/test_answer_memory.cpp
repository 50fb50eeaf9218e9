// A whole answer's memory (issue 21, row 6; openai/choices_responder.h): the peak of the bytes
// allocated while an n=16 answer with logprobs is collected and its body made stays under 3x the
// body's size plus a fixed allowance, measured by counting every operator new and delete of this
// test binary while the test's own code runs. The body is the text dump() gives for the same
// answer as a json tree (what clients got before): canonical (a parse and dump gives it back)
// and equal to the tree built by the layouts of openai/response.h.
#include <doctest/doctest.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <nlohmann/json.hpp>

#include "openai/response.h"
#include "routes/generation_route.h"

namespace {

// Live bytes allocated through operator new since counting began, and their peak.
std::atomic<bool> g_counting{false};
std::atomic<long long> g_live{0}, g_peak{0};

void count(long long delta) {
    if (!g_counting.load(std::memory_order_relaxed)) return;
    long long now = g_live.fetch_add(delta) + delta;
    long long peak = g_peak.load();
    while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
    }
}

struct Counting {
    Counting() {
        g_live = 0;
        g_peak = 0;
        g_counting = true;
    }
    ~Counting() { g_counting = false; }
    static long long peak() { return g_peak.load(); }
};

}  // namespace

// Every allocation of this binary goes through these. The array and nothrow forms are replaced
// too, although libstdc++'s own call the plain ones: under AddressSanitizer its runtime defines
// them, and a nothrow new of its (std::stable_sort's buffer) freed by the delete below was an
// alloc-dealloc mismatch (scripts/sanitize.sh). The aligned forms stay the library's: they pair
// among themselves.
void* operator new(std::size_t n) {
    void* p = std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    count((long long)malloc_usable_size(p));
    return p;
}
void operator delete(void* p) noexcept {
    if (!p) return;
    count(-(long long)malloc_usable_size(p));
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    try {
        return operator new(n);
    } catch (const std::bad_alloc&) {
        return nullptr;
    }
}
void operator delete(void* p, const std::nothrow_t&) noexcept { operator delete(p); }
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t& nt) noexcept { return operator new(n, nt); }
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete[](void* p, std::size_t) noexcept { operator delete(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { operator delete(p); }

using namespace k3::server;
using nlohmann::json;

namespace {

constexpr int kChoices = 16;
constexpr int kTokens = 400;
constexpr int kAlternatives = 20;
// What the test's events and the fixed parts cost besides the answer: an event batch, ids.
constexpr long long kAllowance = 1 << 20;

// Token `t` of choice `c`: text with characters JSON escapes (quote, newline, a control byte),
// a multi-byte character, and now and then a lone byte of one (replaced by U+FFFD).
TokenLogprob token(int c, int t, int alternatives) {
    TokenLogprob lp;
    lp.id = t;
    lp.text = " w" + std::to_string(c * 1000 + t) + (t % 7 == 0 ? "\"\n" : t % 11 == 0 ? "\x01" : "\xc3\xa9");
    if (t % 13 == 0) lp.text += "\xe2";
    lp.logprob = -0.001f * float(t + 1) - 1e-7f * float(c);
    for (int a = 0; a < alternatives; ++a)
        lp.top.push_back({" alt" + std::to_string(a) + (a % 5 == 0 ? "\\" : ""), -0.37f * float(a + 1) - 1e-5f * float(t)});
    return lp;
}

GenerationRequest request(Endpoint endpoint, int logprobs) {
    GenerationRequest r;
    r.endpoint = endpoint;
    r.model = "k3";
    r.params.n = kChoices;
    r.params.logprobs = logprobs;
    r.params.max_tokens = kTokens;
    return r;
}

// Feeds the answer to a whole-answer Responder as the route does (a batch of events at a time,
// each dropped once collected) and returns its body, with the peak measured from the start.
std::string collect_answer(const GenerationRequest& r, long long& peak) {
    std::string body;
    {
        Counting counting;
        auto responder = make_responder(r, "0123456789abcdef");
        for (int t = 0; t < kTokens; ++t) {
            std::vector<JobEvent> batch;
            for (int c = 0; c < kChoices; ++c) {
                JobEvent e;
                e.choice = c;
                e.logprobs.push_back(token(c, t, std::max(0, r.params.logprobs)));
                e.content = e.logprobs.back().text;
                if (t == kTokens - 1) {
                    e.kind = JobEvent::Kind::Done;
                    e.finish_reason = FinishReason::Length;
                    e.last_choice = c == kChoices - 1;
                    e.usage = {3, kChoices * kTokens, 0, 0};
                }
                batch.push_back(std::move(e));
            }
            for (const auto& e : batch) responder->collect(e);
        }
        body = responder->whole_body();
        peak = Counting::peak();
    }
    return body;
}

std::vector<TokenLogprob> choice_tokens(int c, int alternatives) {
    std::vector<TokenLogprob> lps;
    for (int t = 0; t < kTokens; ++t) lps.push_back(token(c, t, alternatives));
    return lps;
}

// Collects an n=16 answer with `alternatives` logprob alternatives on `endpoint`, checks its peak
// and that its body is dump()'s text with each choice's logprobs in the endpoint's layout.
void check_whole_answer(Endpoint endpoint, int alternatives, const char* object) {
    long long peak = 0;
    const std::string body = collect_answer(request(endpoint, alternatives), peak);
    MESSAGE(object << ": body " << body.size() << " bytes, peak " << peak << " bytes ("
                   << double(peak) / double(body.size()) << "x)");
    REQUIRE(body.size() > 1u << 20);
    CHECK(peak <= 3 * (long long)body.size() + kAllowance);

    const json j = json::parse(body);
    CHECK(dump(j) == body);
    CHECK(j["object"] == object);
    CHECK(j["usage"]["completion_tokens"] == kChoices * kTokens);
    REQUIRE(j["choices"].size() == size_t(kChoices));
    for (int c = 0; c < kChoices; ++c) {
        const json& choice = j["choices"][size_t(c)];
        CHECK(choice["index"] == c);
        CHECK(choice["finish_reason"] == "length");
        const std::vector<TokenLogprob> lps = choice_tokens(c, alternatives);
        const json expected = endpoint == Endpoint::Completions ? completion_logprobs_json(lps, 0) : chat_logprobs_json(lps);
        CHECK(dump(choice["logprobs"]) == dump(expected));
    }
}

}  // namespace

TEST_CASE("a whole n=16 chat answer with 20 logprob alternatives peaks under 3x its body; the body is dump()'s text of its tree") {
    check_whole_answer(Endpoint::ChatCompletions, kAlternatives, "chat.completion");
}

TEST_CASE("a whole n=16 completions answer with 5 logprob alternatives peaks under 3x its body; the body is dump()'s text of its tree") {
    check_whole_answer(Endpoint::Completions, 5, "text_completion");
}

TEST_CASE("a whole answer without logprobs has \"logprobs\": null in every choice, as before") {
    long long peak = 0;
    const std::string body = collect_answer(request(Endpoint::ChatCompletions, -1), peak);
    const json j = json::parse(body);
    CHECK(dump(j) == body);
    for (const auto& choice : j["choices"]) CHECK(choice["logprobs"].is_null());
    CHECK(peak <= 3 * (long long)body.size() + kAllowance);
}
