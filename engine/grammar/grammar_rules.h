// The compiled form of every grammar: rules of alternatives, each alternative a sequence of
// symbols. A symbol is a byte class (a set of bytes, one byte of output), a K3 control token
// named by its text (one special token of output) or a reference to another rule. The JSON
// schema compiler, the json_object grammar and the tool-call grammar all build this with
// GrammarBuilder; the automaton (automaton.h) runs it. Rules must not be left-recursive (the
// builders only recurse after a terminal: "{", "[", a tag).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/compile_budget.h"

namespace k3::grammar {

// 256 bits: which bytes a byte-class symbol matches.
struct ByteSet {
    std::array<uint64_t, 4> bits{};
    void add(unsigned b) { bits[b >> 6] |= uint64_t(1) << (b & 63); }
    void add_range(unsigned lo, unsigned hi) {
        for (unsigned b = lo; b <= hi; ++b) add(b);
    }
    bool has(unsigned b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
    bool empty() const { return !(bits[0] | bits[1] | bits[2] | bits[3]); }
    bool operator==(const ByteSet&) const = default;
};

struct Symbol {
    enum class Kind : uint8_t { Bytes, Special, Rule, End };
    Kind kind = Kind::End;
    int32_t index = 0;  // Bytes: byte-set index; Special: special index; Rule: rule id
};

using Sequence = std::vector<Symbol>;

// The finished grammar. Alternatives are laid out flat: `symbols` holds every alternative's
// symbols followed by an End symbol, and a rule lists where its alternatives start.
struct GrammarRules {
    std::vector<Symbol> symbols;
    std::vector<std::vector<int32_t>> rule_starts;  // rule id -> start positions in `symbols`
    std::vector<std::string> rule_names;            // for errors and debugging
    std::vector<ByteSet> byte_sets;
    std::vector<std::string> specials;              // control tokens by text, e.g. "<|open|>"
    int32_t root = 0;
    // Shortest output (in symbols: bytes or control tokens) from each position to the end of
    // its alternative; filled by finish(). Saturates at kUnreachable.
    std::vector<int32_t> rest_min;
    static constexpr int32_t kUnreachable = 1 << 29;
    // Equal for grammars with the same rules (so a compiled automaton and its masks can be
    // reused by a later request asking for the same output); filled by finish().
    uint64_t fingerprint = 0;
};

// Builds GrammarRules. Rules are created first (so they can refer to each other, also
// recursively) and given alternatives afterwards. Every alternative added counts against the
// budget's symbols and clock (compile_budget.h).
class GrammarBuilder {
public:
    explicit GrammarBuilder(const GrammarLimits& limits = {}) : budget_(limits) {}

    int32_t new_rule(std::string name);
    void add_alternative(int32_t rule, Sequence seq);
    // A rule with the given alternatives (a convenience for new_rule + add_alternative).
    int32_t rule(std::string name, std::vector<Sequence> alternatives);

    Symbol bytes(const ByteSet& set);
    Symbol byte(unsigned char b);
    Symbol special(std::string_view text);
    static Symbol ref(int32_t rule) { return {Symbol::Kind::Rule, rule}; }
    Sequence literal(std::string_view text);

    // X*, X+, X? and X{min,max} (max < 0: unbounded) as new rules.
    int32_t star(const Sequence& x, const std::string& name);
    int32_t optional(const Sequence& x, const std::string& name);
    int32_t repeat(const Sequence& x, int min, int max, const std::string& name);

    // Copies every rule of `g` into this builder; returns the id its root has here.
    int32_t import(const GrammarRules& g);

    // Checks that every rule has an alternative and can produce a finite output, computes
    // rest_min, and hands the rules over.
    GrammarRules finish(int32_t root);

    size_t rule_count() const { return alternatives_.size(); }
    CompileBudget& budget() { return budget_; }

private:
    CompileBudget budget_;
    std::vector<std::vector<Sequence>> alternatives_;
    std::vector<std::string> names_;
    std::vector<ByteSet> byte_sets_;
    std::array<int32_t, 256> single_byte_set_ = filled_minus_one();  // byte -> its one-byte set, -1 = none yet
    std::vector<std::string> specials_;

    static std::array<int32_t, 256> filled_minus_one() {
        std::array<int32_t, 256> a;
        a.fill(-1);
        return a;
    }
};

inline Sequence concat(std::initializer_list<Sequence> parts) {
    Sequence out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

}  // namespace k3::grammar
