// What compiling an enum costs (docs/operations.md "Grammar budgets": 60,000 strings with a shared 40-byte prefix took
// 26-44 s of the engine worker). For enums of 1k, 10k and 60k such strings: the rules
// (Grammar::json_schema, the enum as a trie) and the matcher (automaton start and first mask
// over a 32k synthetic vocabulary), as the daemon compiles them on the HTTP thread, in ms and
// in us per value; and, beside it in the same run, the rule the enum was before the trie (one
// alternative per value, each its whole text) on the same automaton, as a ratio. The budgets
// are raised so that the 60k enum compiles (the daemon refuses it at --grammar-max-enum 10000).
//
// usage: bench_grammar_compile [--vocab N] [--plain-max N]
//   --plain-max: the largest enum also compiled the old way (default 10000; 60000 takes long)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <vector>

#include "grammar/grammar_rules.h"
#include "k3/grammar.h"
#include "k3/tokenizer.h"
#include "synthetic/vocab.h"
#include "load_average.h"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::vector<std::string> prefixed_values(size_t n) {
    std::vector<std::string> v;
    const std::string prefix(40, 'p');
    for (size_t i = 0; i < n; ++i) v.push_back(prefix + std::to_string(i * 7919 % 1000003));
    return v;
}

// The enum's rule before the trie: one alternative per value.
k3::Grammar one_alternative_per_value(const std::vector<std::string>& values, const k3::GrammarLimits& limits) {
    k3::grammar::GrammarBuilder b(limits);
    std::vector<k3::grammar::Sequence> alts;
    for (const auto& v : values) alts.push_back(b.literal(json(v).dump()));
    int32_t root = b.rule("enum", alts);
    return k3::Grammar(std::make_shared<k3::grammar::GrammarRules>(b.finish(root)));
}

struct Timing {
    double rules_ms = 0, matcher_ms = 0;
    size_t symbols = 0, states = 0;
    double total() const { return rules_ms + matcher_ms; }
};

template <class MakeGrammar>
Timing compile(MakeGrammar&& make, const std::shared_ptr<const k3::TokenTable>& table, const k3::GrammarLimits& limits) {
    Timing t;
    auto t0 = Clock::now();
    k3::Grammar g = make();
    t.rules_ms = ms_since(t0);
    t0 = Clock::now();
    k3::GrammarMatcher m(g, table, limits);
    t.matcher_ms = ms_since(t0);
    t.symbols = g.rules().symbols.size();
    t.states = m.stats().automaton_states;
    return t;
}

}  // namespace

int main(int argc, char** argv) {
    int vocab = 32768;
    size_t plain_max = 10000;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--vocab") && i + 1 < argc) vocab = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--plain-max") && i + 1 < argc) plain_max = size_t(std::atol(argv[++i]));
        else {
            std::fprintf(stderr, "usage: bench_grammar_compile [--vocab N] [--plain-max N]\n");
            return 2;
        }
    }
    const auto dir = std::filesystem::temp_directory_path() / ("bench-grammar-compile-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);  // write_tokenizer_files writes into it, it does not make it
    k3::write_tokenizer_files(k3::build_synthetic_vocab(vocab), dir);
    auto tok = k3::Tokenizer::load(dir);
    std::filesystem::remove_all(dir);
    std::vector<int32_t> ends;
    for (const char* name : {"[EOS]", "<|end_of_msg|>"})
        if (auto id = tok->special_id(name)) ends.push_back(*id);
    auto table = std::make_shared<const k3::TokenTable>(*tok, tok->n_vocab(), ends);

    k3::GrammarLimits limits;  // raised: this measures the cost, the daemon's defaults refuse 60k
    limits.max_enum_values = 1000000;
    limits.max_literal_bytes = size_t(1) << 30;
    limits.max_symbols = size_t(1) << 30;
    limits.max_states = size_t(1) << 24;
    limits.max_compile_ms = 1e9;

    std::printf("load average: %s\n", load_average().c_str());
    std::printf("vocabulary %d tokens (synthetic); enum values: a 40-byte prefix, then digits\n", tok->n_vocab());
    std::printf("%-7s %-6s %10s %10s %10s %12s %9s %7s\n", "values", "rule", "rules_ms", "matcher_ms", "total_ms",
                "us/value", "symbols", "states");
    for (size_t n : {size_t(1000), size_t(10000), size_t(60000)}) {
        const std::vector<std::string> values = prefixed_values(n);
        const std::string schema = json{{"enum", values}}.dump();
        const Timing trie = compile([&] { return k3::Grammar::json_schema(schema, limits); }, table, limits);
        std::printf("%-7zu %-6s %10.1f %10.1f %10.1f %12.2f %9zu %7zu\n", n, "trie", trie.rules_ms, trie.matcher_ms,
                    trie.total(), 1000 * trie.total() / double(n), trie.symbols, trie.states);
        if (n > plain_max) {
            std::printf("%-7zu %-6s (skipped: --plain-max %zu)\n", n, "plain", plain_max);
            continue;
        }
        const Timing plain = compile([&] { return one_alternative_per_value(values, limits); }, table, limits);
        std::printf("%-7zu %-6s %10.1f %10.1f %10.1f %12.2f %9zu %7zu   plain/trie %.1fx\n", n, "plain", plain.rules_ms,
                    plain.matcher_ms, plain.total(), 1000 * plain.total() / double(n), plain.symbols, plain.states,
                    plain.total() / std::max(trie.total(), 1e-3));
    }
    std::printf("load average: %s\n", load_average().c_str());
    return 0;
}
