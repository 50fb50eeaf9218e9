// Several conversations in one engine: what continuous batching and the shared prompt cache buy,
// as ratios measured in the same run (engine level, the way the daemon's worker drives it).
//   bench_batching MODEL_DIR [--part batch|ttft|resume|verify|all] [--gen N] [--threads N]
//                  [--trunk-gb G --cache-gb G] [--system N]
// batch:  aggregate decode tokens/s of 4 sequences stepped together against 1 alone (greedy,
//         prompts of different lengths), and whether each batched sequence's tokens equal its
//         solo tokens.
// ttft:   a shared system prompt of N tokens (default 2000) and 8 different user turns, one
//         after the other in fresh sessions (8 clients): time to first token of turns 2-8
//         against turn 1, which found nothing cached (cold).
// resume: a conversation (prompt + generated tokens) continued after 3 other conversations
//         ran: reused tokens and time to first token against cold.
// verify: the cost of one step that evaluates a token and K drafts with every row's logits (the
//         speculative verify step, K = 2, 4, 8) against one plain decode step.
// Cold is always a prompt of the same length sharing nothing with what is cached.
// The memory flags apply to every part (default: everything resident).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "k3/engine.h"
#include "load_average.h"

using namespace k3;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
    std::string model, part = "all";
    int gen = 16, threads = 0, system = 2000;
    double trunk_gb = -1, cache_gb = -1;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::unique_ptr<Engine> load(const Args& a, double prompt_cache_gb) {
    EngineOptions o;
    o.model_dir = a.model;
    o.threads = a.threads;
    o.memory.trunk_gb = a.trunk_gb;
    o.memory.cache_gb = a.cache_gb;
    o.memory.prompt_cache_gb = prompt_cache_gb;
    return Engine::load(o);
}

std::vector<int32_t> prompt(int n, int salt, int vocab) {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(int32_t((i * 7919 + salt * 104729 + 17) % (vocab - 512)));
    return ids;
}

int32_t argmax(std::span<const float> v) {
    return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

void must(const Status& s, const char* what) {
    if (!s.ok()) {
        std::fprintf(stderr, "%s failed: %s\n", what, s.message.c_str());
        std::exit(1);
    }
}

void bench_batch(const Args& a) {
    auto e = load(a, 0);
    const int V = e->info().n_vocab;
    const int lengths[4] = {12, 5, 20, 9};
    CancelFlag cancel{false};
    std::vector<std::unique_ptr<Session>> s;
    for (int i = 0; i < 4; ++i) {
        s.push_back(e->new_session(256));
        must(s.back()->sync(prompt(lengths[i], i, V), cancel), "prefill");
    }
    // warm the weights once (the first step after load touches cold pages)
    auto warm = e->new_session(64);
    must(warm->sync(prompt(3, 9, V), cancel), "warm-up");
    must(warm->append(1, cancel), "warm-up");

    // 1 alone: sequence 0 decodes gen tokens
    std::vector<std::vector<int32_t>> solo(4);
    auto solo_session = e->new_session(256);
    std::vector<double> solo_seconds;
    for (int i = 0; i < 4; ++i) {
        must(solo_session->sync(prompt(lengths[i], i, V), cancel), "prefill");
        const auto t0 = Clock::now();
        for (int k = 0; k < a.gen; ++k) {
            solo[size_t(i)].push_back(argmax(solo_session->logits()));
            must(solo_session->append(solo[size_t(i)].back(), cancel), "decode");
        }
        solo_seconds.push_back(seconds_since(t0));
    }
    // 4 together: every step carries one token of each
    std::vector<std::vector<int32_t>> batched(4);
    std::vector<int32_t> next(4);
    const auto t0 = Clock::now();
    for (int k = 0; k < a.gen; ++k) {
        std::vector<Engine::StepItem> items;
        for (int i = 0; i < 4; ++i) {
            next[size_t(i)] = argmax(s[size_t(i)]->logits());
            batched[size_t(i)].push_back(next[size_t(i)]);
            items.push_back({s[size_t(i)].get(), std::span<const int32_t>(&next[size_t(i)], 1)});
        }
        must(e->step(items), "batched step");
    }
    const double batch_s = seconds_since(t0);
    double solo_s = 0;  // the mean of the four solo runs (one token at a time each)
    for (double t : solo_seconds) solo_s += t / 4;
    const double one = a.gen / solo_s, four = 4.0 * a.gen / batch_s;
    bool same = true;
    for (int i = 0; i < 4; ++i) same = same && batched[size_t(i)] == solo[size_t(i)];
    std::printf("batch: %d tokens each; 1 alone %.3f s/token (%.2f tok/s); 4 together %.3f s/step, "
                "%.2f tok/s aggregate; ratio %.2fx; tokens identical to solo: %s\n",
                a.gen, solo_s / a.gen, one, batch_s / a.gen, four, four / one, same ? "yes" : "NO");
}

double ttft(Engine& e, const std::vector<int32_t>& ids, int* reused) {
    auto s = e.new_session(int(ids.size()) + 8);
    CancelFlag cancel{false};
    const auto t0 = Clock::now();
    must(s->sync(ids, cancel, reused), "prefill");
    argmax(s->logits());
    return seconds_since(t0);
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Turn 1 finds nothing cached: it is the cold reference (one engine, so k3-mini's weights are
// loaded once).
void bench_ttft(const Args& a) {
    auto warm = load(a, -1);
    const int V = warm->info().n_vocab;
    const auto system = prompt(a.system, 100, V);
    int reused = 0;
    std::printf("ttft: shared system prompt %d tokens + 30-token user turns, 8 clients in turn\n", a.system);
    double cold_s = 0, sum = 0;
    std::vector<double> later;
    for (int turn = 1; turn <= 8; ++turn) {
        const double t = ttft(*warm, concat(system, prompt(30, 200 + turn, V)), &reused);
        if (turn == 1) cold_s = t;
        std::printf("  turn %d: %.2f s, reused %d tokens, %.1f%% of turn 1 (cold)\n", turn, t, reused,
                    100 * t / cold_s);
        if (turn >= 2) {
            later.push_back(t);
            sum += t;
        }
    }
    std::sort(later.begin(), later.end());
    std::printf("  turns 2-8: mean %.1f%%, median %.1f%% of cold\n", 100 * sum / double(later.size()) / cold_s,
                100 * later[later.size() / 2] / cold_s);
}

void bench_resume(const Args& a) {
    auto warm = load(a, -1);
    const int V = warm->info().n_vocab;
    CancelFlag cancel{false};
    // the conversation: a 300-token prompt and 16 generated tokens, kept by remember()
    auto s = warm->new_session(1024);
    std::vector<int32_t> convo = prompt(300, 300, V);
    must(s->sync(convo, cancel), "prefill");
    for (int k = 0; k < 16; ++k) {
        convo.push_back(argmax(s->logits()));
        must(s->append(convo.back(), cancel), "decode");
    }
    s->remember();
    // three other conversations in the same session (as a slot would run them)
    for (int k = 0; k < 3; ++k) must(s->sync(prompt(300, 400 + k, V), cancel), "other");
    const auto next = concat(convo, prompt(20, 500, V));
    int reused = 0, cold_reused = 0;
    const double w = ttft(*warm, next, &reused);
    auto unrelated = next;
    for (auto& id : unrelated) id = (id + 1) % (V - 512);  // same length, nothing cached
    const double c = ttft(*warm, unrelated, &cold_reused);
    std::printf("resume: %zu-token turn after 3 other conversations: reused %d tokens, %.2f s vs cold %.2f s "
                "(%.1f%%)\n",
                next.size(), reused, w, c, 100 * w / c);
}

void bench_verify(const Args& a) {
    auto e = load(a, 0);
    const int V = e->info().n_vocab;
    CancelFlag cancel{false};
    auto s = e->new_session(512);
    must(s->sync(prompt(16, 1, V), cancel), "prefill");
    must(s->append(1, cancel), "warm-up");
    const int reps = 3;
    auto timed_step = [&](int k) {
        std::vector<double> t;
        for (int r = 0; r < reps; ++r) {
            const size_t before = s->tokens().size();
            const std::vector<int32_t> tokens = prompt(k + 1, 50 + r, V);
            const auto t0 = Clock::now();
            must(e->step(std::vector<Engine::StepItem>{{s.get(), tokens, k > 0}}), "step");
            t.push_back(seconds_since(t0));
            if (k > 0) must(s->truncate(before + 1), "truncate");
        }
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    };
    const double one = timed_step(0);
    std::printf("verify: one plain step %.3f s (median of %d)\n", one, reps);
    for (int k : {2, 4, 8}) {
        const double t = timed_step(k);
        std::printf("  token + %d drafts in one step: %.3f s = %.2fx one step (%.2fx per token)\n", k, t, t / one,
                    t / one / (k + 1));
    }
}

}  // namespace

int main(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string s = argv[i];
        auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (s == "--part") a.part = next();
        else if (s == "--gen") a.gen = std::atoi(next().c_str());
        else if (s == "--threads") a.threads = std::atoi(next().c_str());
        else if (s == "--system") a.system = std::atoi(next().c_str());
        else if (s == "--trunk-gb") a.trunk_gb = std::atof(next().c_str());
        else if (s == "--cache-gb") a.cache_gb = std::atof(next().c_str());
        else a.model = s;
    }
    if (a.model.empty()) {
        std::fprintf(stderr, "usage: bench_batching MODEL_DIR [--part batch|ttft|resume|verify|all] [--gen N] "
                             "[--threads N] [--trunk-gb G --cache-gb G] [--system N]\n");
        return 2;
    }
    std::printf("model %s, trunk_gb %.2f, cache_gb %.2f; load average at start: %s\n", a.model.c_str(), a.trunk_gb,
                a.cache_gb, load_average().c_str());
    if (a.part == "batch" || a.part == "all") bench_batch(a);
    if (a.part == "ttft" || a.part == "all") bench_ttft(a);
    if (a.part == "resume" || a.part == "all") bench_resume(a);
    if (a.part == "verify" || a.part == "all") bench_verify(a);
    std::printf("load average at end: %s\n", load_average().c_str());
    return 0;
}
