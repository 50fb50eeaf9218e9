// Constrained decoding overhead per generated token, against the unconstrained decode step
// measured in the same run, on a model with every weight resident (the fastest step, so the
// worst case for the ratio). Two grammars: a json_schema with 20 properties and a required
// tool call (3 tools). For each: the grammar's time per token (logits copy + mask + accept),
// its mean and median as a fraction of the median step, the mask cache hit rate over the run
// (requests restart from the grammar's start state, keeping the cache, as the worker does for
// a grammar it saw recently), 10 later requests replayed on the run's logits with other seeds
// (steady state: hit rate and cost), and the time to build the token table at start-up (this model's tokenizer,
// and a 200k-token vocabulary when tests/node has the tiktoken package installed).
//
// usage: bench_grammar [MODEL_DIR] [--tokens N] [--threads N]
//   MODEL_DIR defaults to /work/models/k3-mini (make-model --preset k3-mini). Goal: <= 5%.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "grammar/grammar_rules.h"
#include "k3/engine.h"
#include "k3/grammar.h"
#include "k3/sampler.h"
#include "k3/tokenizer.h"
#include "tokenizer/tokenizer_fixtures.h"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}
double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / double(v.size());
}

std::string twenty_property_schema() {
    std::string props, required;
    const char* types[] = {R"({"type":"string"})", R"({"type":"integer","minimum":0,"maximum":1000})",
                           R"({"type":"boolean"})", R"({"enum":["low","medium","high"]})",
                           R"({"type":"array","items":{"type":"number"},"maxItems":4})"};
    for (int i = 0; i < 20; ++i) {
        std::string name = "field_" + std::to_string(i);
        if (i) props += ",", required += ",";
        props += "\"" + name + "\":";
        props += types[i % 5];
        required += "\"" + name + "\"";
    }
    return R"({"type":"object","properties":{)" + props + R"(},"required":[)" + required +
           R"(],"additionalProperties":false})";
}

std::vector<k3::ToolDeclaration> three_tools() {
    return {
        {"get_weather", R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":14},"unit":{"enum":["c","f"]}},"required":["city"]})"},
        {"search_files", R"({"type":"object","properties":{"query":{"type":"string"},"max_results":{"type":"integer"},"paths":{"type":"array","items":{"type":"string"}}},"required":["query"]})"},
        {"send_email", R"({"type":"object","properties":{"to":{"type":"string"},"subject":{"type":"string"},"urgent":{"type":"boolean"}},"required":["to","subject"]})"},
    };
}

struct Phase {
    std::vector<double> step, grammar;  // seconds per token: engine step; grammar work
    k3::GrammarStats stats;
    int requests = 0;
    std::vector<std::vector<float>> logits;  // the model's logits at each constrained step
};

// Later requests for the same grammar, as the worker serves them (one matcher, reset between
// requests): sampled with other seeds from the logits the model gave in the measured run.
struct Replay {
    std::vector<double> grammar;
    double hit_rate = 0;
};
Replay replay(const k3::Grammar& g, std::shared_ptr<const k3::TokenTable> table, const std::vector<std::vector<float>>& rows,
              int per_request, int requests) {
    Replay out;
    k3::GrammarMatcher m(g, table);
    std::vector<float> masked;
    uint64_t masks_before = 0, hits_before = 0;
    for (int r = 0; r < requests; ++r) {
        if (r == 1) masks_before = m.stats().masks, hits_before = m.stats().mask_cache_hits;  // skip the first
        m.reset();
        k3::SamplingParams sp;
        sp.temperature = 1.0f;
        sp.seed = uint64_t(100 + r);
        k3::Sampler sampler(sp);
        for (int i = 0; i < per_request && !m.finished(); ++i) {
            const auto& row = rows[size_t(i) % rows.size()];
            auto t0 = Clock::now();
            masked.assign(row.begin(), row.end());
            m.mask_logits(masked, per_request - i);
            int32_t id = sampler.sample(masked);
            if (!m.accept(id)) std::exit(1);
            if (r > 0) out.grammar.push_back(since(t0));
        }
    }
    auto st = m.stats();
    out.hit_rate = double(st.mask_cache_hits - hits_before) / double(std::max<uint64_t>(1, st.masks - masks_before));
    return out;
}

// Decodes `tokens` tokens; with a grammar, requests of at most `per_request` tokens restart
// the matcher (reset: same automaton and cache) whenever the output is complete.
Phase run(k3::Session& s, const std::vector<int32_t>& prompt, int tokens, const k3::Grammar* g,
          std::shared_ptr<const k3::TokenTable> table, int per_request, std::string* sample_text,
          const k3::Tokenizer& tok) {
    Phase ph;
    k3::CancelFlag cancel{false};
    if (!s.sync(prompt, cancel).ok()) std::exit(1);
    std::optional<k3::GrammarMatcher> m;
    if (g) m.emplace(*g, table);
    k3::SamplingParams sp;
    sp.temperature = 1.0f;
    sp.seed = 42;
    k3::Sampler sampler(sp);
    std::vector<float> masked;
    int in_request = 0;
    ph.requests = 1;
    for (int i = 0; i < tokens; ++i) {
        std::span<const float> logits = s.logits();
        int32_t id;
        if (m) {
            ph.logits.emplace_back(logits.begin(), logits.end());
            auto t0 = Clock::now();
            masked.assign(logits.begin(), logits.end());
            m->mask_logits(masked, per_request - in_request);
            double t_mask = since(t0);
            id = sampler.sample(masked);
            t0 = Clock::now();
            if (!m->accept(id)) {
                std::fprintf(stderr, "grammar refused the sampled token\n");
                std::exit(1);
            }
            ph.grammar.push_back(t_mask + since(t0));
            if (sample_text && ph.requests == 1) *sample_text += tok.decode(std::vector<int32_t>{id});
            if (m->finished() || ++in_request >= per_request) {
                m->reset();
                in_request = 0;
                ph.requests++;
            }
        } else {
            id = sampler.sample(logits);
        }
        auto t0 = Clock::now();
        if (!s.append(id, cancel).ok()) std::exit(1);
        ph.step.push_back(since(t0));
    }
    if (m) ph.stats = m->stats();
    return ph;
}

}  // namespace

int main(int argc, char** argv) {
    std::string dir = "/work/models/k3-mini";
    int tokens = 120, threads = 0;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--tokens" && i + 1 < argc) tokens = std::atoi(argv[++i]);
        else if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
        else dir = a;
    }
    if (!std::getenv("K3_SOURCE_DIR")) setenv("K3_SOURCE_DIR", K3_SOURCE_DIR_DEFAULT, 1);
    if (!std::filesystem::exists(std::filesystem::path(dir) / "config.json")) {
        std::fprintf(stderr, "no model at %s: k3serve make-model %s --preset k3-mini\n", dir.c_str(), dir.c_str());
        return 2;
    }
    auto tok = k3::Tokenizer::load(dir);
    k3::EngineOptions opt;
    opt.model_dir = dir;
    opt.threads = threads;
    std::fprintf(stderr, "loading %s (all weights resident)...\n", dir.c_str());
    auto engine = k3::Engine::load(opt);
    const auto& info = engine->info();
    std::vector<int32_t> ends;
    if (info.eos_token_id >= 0) ends.push_back(info.eos_token_id);
    if (auto id = tok->special_id("<|end_of_msg|>")) ends.push_back(*id);

    // Token table build time: this tokenizer, and a real-sized one when available.
    std::vector<double> builds;
    std::shared_ptr<const k3::TokenTable> table;
    for (int r = 0; r < 3; ++r) {
        table = std::make_shared<const k3::TokenTable>(*tok, info.n_vocab, ends);
        builds.push_back(table->build_seconds());
    }
    std::printf("model %s: %s, vocab %d\n", dir.c_str(), info.shape.c_str(), info.n_vocab);
    std::printf("token table build: %.4f s for %d tokens (best of 3)\n", *std::min_element(builds.begin(), builds.end()),
                info.n_vocab);
    try {
        auto big = k3::test::kimi_over_o200k();
        auto big_table = k3::TokenTable(*big, big->n_vocab(), {});
        std::printf("token table build: %.4f s for %d tokens (o200k ranks, Kimi specials)\n", big_table.build_seconds(),
                    big->n_vocab());
    } catch (const std::exception& e) {
        std::printf("token table for a 200k vocabulary: skipped (%s)\n", e.what());
    }

    std::vector<int32_t> prompt;
    for (int i = 0; i < 24; ++i) prompt.push_back(int32_t((i * 7919 + 13) % (info.n_vocab - 256)));
    auto session = engine->new_session(int(prompt.size()) + tokens + 8);

    k3::Grammar schema = k3::Grammar::json_schema(twenty_property_schema());
    auto tools = three_tools();
    k3::Grammar tool_call = k3::Grammar::tool_calls(tools, {});
    std::printf("grammar rules: json_schema(20 properties) %zu, tool call (3 tools) %zu\n",
                schema.rules().rule_starts.size(), tool_call.rules().rule_starts.size());

    Phase base = run(*session, prompt, tokens, nullptr, table, 0, nullptr, *tok);
    const double step = median(base.step);
    std::printf("unconstrained: %zu steps, median %.4f s/token, mean %.4f\n", base.step.size(), step, mean(base.step));

    struct Named {
        const char* name;
        const k3::Grammar* g;
        int per_request;
    } grammars[] = {{"json_schema, 20 properties", &schema, 400}, {"tool call required, 3 tools", &tool_call, 160}};
    for (const Named& n : grammars) {
        std::string text;
        Phase ph = run(*session, prompt, tokens, n.g, table, n.per_request, &text, *tok);
        const double s_med = median(ph.step);
        std::printf("%s: %zu tokens in %d request(s)\n", n.name, ph.grammar.size(), ph.requests);
        std::printf("  grammar per token: median %.6f s, mean %.6f s, max %.6f s\n", median(ph.grammar),
                    mean(ph.grammar), *std::max_element(ph.grammar.begin(), ph.grammar.end()));
        std::printf("  overhead / unconstrained step: median %.4f%%, mean %.4f%% (goal <= 5%%); step here %.4f s\n",
                    100 * median(ph.grammar) / step, 100 * mean(ph.grammar) / step, s_med);
        std::printf("  mask cache: %llu of %llu masks from the cache (%.1f%%), %llu budget-forced, %zu automaton states\n",
                    (unsigned long long)ph.stats.mask_cache_hits, (unsigned long long)ph.stats.masks,
                    100.0 * double(ph.stats.mask_cache_hits) / double(std::max<uint64_t>(1, ph.stats.masks)),
                    (unsigned long long)ph.stats.forced_masks, ph.stats.automaton_states);
        Replay later = replay(*n.g, table, ph.logits, n.per_request, 11);
        std::printf("  10 later requests (one matcher, reset between): mask cache hits %.1f%%, grammar per token mean "
                    "%.6f s, max %.6f s = %.4f%% / %.4f%% of the step\n",
                    100 * later.hit_rate, mean(later.grammar),
                    *std::max_element(later.grammar.begin(), later.grammar.end()), 100 * mean(later.grammar) / step,
                    100 * *std::max_element(later.grammar.begin(), later.grammar.end()) / step);
        if (text.size() > 160) text = text.substr(0, 160) + "...";
        std::printf("  first output: %s\n", text.c_str());
    }
    return 0;
}
