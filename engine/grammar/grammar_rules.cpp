// GrammarBuilder: rule construction, repetition helpers, and the final checks (every rule can
// finish; shortest completions per position, which budget forcing relies on).
#include "grammar/grammar_rules.h"

#include <algorithm>

#include "k3/error.h"
#include "k3/fnv1a.h"
#include "k3/grammar.h"

namespace k3::grammar {

int32_t GrammarBuilder::new_rule(std::string name) {
    alternatives_.emplace_back();
    names_.push_back(std::move(name));
    return int32_t(alternatives_.size() - 1);
}

void GrammarBuilder::add_alternative(int32_t rule, Sequence seq) {
    budget_.add_symbols(seq.size() + 1);  // and its End
    alternatives_[size_t(rule)].push_back(std::move(seq));
}

int32_t GrammarBuilder::rule(std::string name, std::vector<Sequence> alternatives) {
    int32_t r = new_rule(std::move(name));
    for (auto& a : alternatives) add_alternative(r, std::move(a));
    return r;
}

Symbol GrammarBuilder::bytes(const ByteSet& set) {
    for (size_t i = 0; i < byte_sets_.size(); ++i)
        if (byte_sets_[i] == set) return {Symbol::Kind::Bytes, int32_t(i)};
    byte_sets_.push_back(set);
    return {Symbol::Kind::Bytes, int32_t(byte_sets_.size() - 1)};
}

Symbol GrammarBuilder::byte(unsigned char b) {
    // Literals are made of single bytes: look their sets up directly, not by a scan of every set.
    if (single_byte_set_[b] < 0) {
        ByteSet s;
        s.add(b);
        single_byte_set_[b] = bytes(s).index;
    }
    return {Symbol::Kind::Bytes, single_byte_set_[b]};
}

Symbol GrammarBuilder::special(std::string_view text) {
    for (size_t i = 0; i < specials_.size(); ++i)
        if (specials_[i] == text) return {Symbol::Kind::Special, int32_t(i)};
    specials_.emplace_back(text);
    return {Symbol::Kind::Special, int32_t(specials_.size() - 1)};
}

Sequence GrammarBuilder::literal(std::string_view text) {
    Sequence s;
    for (unsigned char c : text) s.push_back(byte(c));
    return s;
}

int32_t GrammarBuilder::star(const Sequence& x, const std::string& name) {
    // Right recursion: star := x star | (empty).
    int32_t r = new_rule(name);
    add_alternative(r, concat({x, {ref(r)}}));
    add_alternative(r, {});
    return r;
}

int32_t GrammarBuilder::optional(const Sequence& x, const std::string& name) { return rule(name, {x, {}}); }

int32_t GrammarBuilder::repeat(const Sequence& x, int min, int max, const std::string& name) {
    // x{min} followed by either x* (max < 0) or a chain of (max - min) nested optionals, each
    // "x next | (empty)", so the grammar grows linearly with max.
    Sequence seq;
    for (int i = 0; i < min; ++i) seq.insert(seq.end(), x.begin(), x.end());
    if (max < 0) {
        seq.push_back(ref(star(x, name + "*")));
    } else if (max > min) {
        int32_t tail = -1;
        for (int i = 0; i < max - min; ++i) {
            Sequence alt = x;
            if (tail >= 0) alt.push_back(ref(tail));
            tail = rule(name + "?" + std::to_string(i), {alt, {}});
        }
        seq.push_back(ref(tail));
    }
    return rule(name, {seq});
}

int32_t GrammarBuilder::import(const GrammarRules& g) {
    const int32_t base = int32_t(rule_count());
    for (const auto& name : g.rule_names) new_rule(name);
    // Each byte set and control token of `g` is looked up here once, not once per symbol.
    std::vector<Symbol> set_here, special_here;
    for (const ByteSet& set : g.byte_sets) set_here.push_back(bytes(set));
    for (const std::string& text : g.specials) special_here.push_back(special(text));
    for (size_t r = 0; r < g.rule_starts.size(); ++r) {
        for (int32_t pos : g.rule_starts[r]) {
            Sequence seq;
            for (size_t i = size_t(pos); g.symbols[i].kind != Symbol::Kind::End; ++i) {
                const Symbol& s = g.symbols[i];
                switch (s.kind) {
                    case Symbol::Kind::Bytes: seq.push_back(set_here[size_t(s.index)]); break;
                    case Symbol::Kind::Special: seq.push_back(special_here[size_t(s.index)]); break;
                    default: seq.push_back(ref(base + s.index)); break;
                }
            }
            add_alternative(base + int32_t(r), std::move(seq));
        }
    }
    return base + g.root;
}

GrammarRules GrammarBuilder::finish(int32_t root) {
    constexpr int32_t kInf = GrammarRules::kUnreachable;
    const size_t n_rules = alternatives_.size();
    // Shortest output of each rule, by fixed point (a rule referring only to unfinished rules
    // stays at infinity: it can never end). A schema can ask for that (an object that requires
    // itself), so it is the request's error: no finite value satisfies it.
    std::vector<int32_t> rule_min(n_rules, kInf);
    auto seq_min = [&](const Sequence& s) {
        int64_t total = 0;
        for (const Symbol& sym : s) total += sym.kind == Symbol::Kind::Rule ? rule_min[size_t(sym.index)] : 1;
        return int32_t(std::min<int64_t>(total, kInf));
    };
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < n_rules; ++r, budget_.tick())
            for (const auto& alt : alternatives_[r])
                if (int32_t m = seq_min(alt); m < rule_min[r]) {
                    rule_min[r] = m;
                    changed = true;
                }
    }
    budget_.check_time();
    for (size_t r = 0; r < n_rules; ++r)
        if (rule_min[r] >= kInf)
            throw GrammarError("", "", "no finite value satisfies this schema: its rule '" + names_[r] +
                                           "' can never finish (a required property or item that contains itself?)");

    GrammarRules g;
    g.rule_starts.resize(n_rules);
    for (size_t r = 0; r < n_rules; ++r) {
        for (const auto& alt : alternatives_[r]) {
            g.rule_starts[r].push_back(int32_t(g.symbols.size()));
            g.symbols.insert(g.symbols.end(), alt.begin(), alt.end());
            g.symbols.push_back({Symbol::Kind::End, 0});
        }
    }
    g.rest_min.assign(g.symbols.size(), 0);
    for (size_t i = g.symbols.size(); i-- > 0;) {
        const Symbol& s = g.symbols[i];
        if (s.kind == Symbol::Kind::End) continue;
        int64_t here = s.kind == Symbol::Kind::Rule ? rule_min[size_t(s.index)] : 1;
        g.rest_min[i] = int32_t(std::min<int64_t>(here + g.rest_min[i + 1], kInf));
    }
    g.rule_names = std::move(names_);
    g.byte_sets = std::move(byte_sets_);
    g.specials = std::move(specials_);
    g.root = root;
    // FNV-1a over everything that defines the language (names are only labels).
    Fnv1a h;
    auto mix = [&](const void* data, size_t n) { h.add(data, n); };
    for (const Symbol& s : g.symbols) mix(&s.kind, 1), mix(&s.index, sizeof s.index);
    for (const auto& starts : g.rule_starts) {
        mix(starts.data(), starts.size() * sizeof(int32_t));
        mix("|", 1);
    }
    for (const auto& set : g.byte_sets) mix(set.bits.data(), sizeof set.bits);
    for (const auto& sp : g.specials) mix(sp.data(), sp.size() + 1);
    mix(&g.root, sizeof g.root);
    g.fingerprint = h.value();
    return g;
}

}  // namespace k3::grammar
