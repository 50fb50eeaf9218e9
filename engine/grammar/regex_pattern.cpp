// A small recursive-descent regex compiler: the pattern into an NFA over characters, the NFA
// (with a count of characters, for minLength/maxLength) into GrammarBuilder rules (see
// regex_pattern.h).
#include "grammar/regex_pattern.h"

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "k3/grammar.h"

namespace k3::grammar {

namespace {

// A set of characters: ASCII ones exactly, non-ASCII ones either all or a list of literals.
struct CharSet {
    ByteSet ascii;  // only bits 0..127 used
    bool all_non_ascii = false;
    std::vector<std::string> non_ascii;  // UTF-8 literals
};

// A Thompson NFA over characters: each consuming edge is one character, written as the
// Sequence of its class (classes[cls]); cls -1 is an empty move. Fragments are built from the
// pattern's parts and wired together; a repeated part is copied (its states are a contiguous
// range whose edges stay inside it until it is wired).
struct Nfa {
    struct Edge {
        int to;
        int cls;
    };
    std::vector<std::vector<Edge>> out;
    std::vector<Sequence> classes;
};

struct Fragment {
    int start, end;
};

class PatternCompiler {
public:
    PatternCompiler(JsonRules& json, const std::string& pattern, bool raw, const std::string& path)
        : j_(json), b_(json.b), p_(pattern), raw_(raw), path_(path) {}

    int32_t compile(int min_length, int max_length) {
        std::string body = p_;
        bool anchored_start = !body.empty() && body[0] == '^';
        bool anchored_end = body.size() >= 2 && body.back() == '$' && body[body.size() - 2] != '\\';
        if (body == "$" ) anchored_end = true;
        p_ = body.substr(anchored_start ? 1 : 0, body.size() - (anchored_start ? 1 : 0) - (anchored_end ? 1 : 0));
        pos_ = 0;
        Fragment top = alternation();
        if (pos_ != p_.size()) fail("unbalanced ')'");
        if ((anchored_start || anchored_end) && top_level_alternation_)
            fail("anchors with a top-level '|' (wrap the alternatives in a group: ^(a|b)$)");
        // Without an anchor the match may sit anywhere: any characters before and after it.
        const int any = int(nfa_.classes.size());
        nfa_.classes.push_back({GrammarBuilder::ref(j_.string_char(raw_))});
        int start = top.start, end = top.end;
        if (!anchored_start) {
            start = state();
            edge(start, start, any);
            edge(start, top.start);
        }
        if (!anchored_end) {
            end = state();
            edge(top.end, end);
            edge(end, end, any);
        }
        return emit_rules(start, end, min_length, max_length);
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw GrammarError("pattern", path_, "unsupported 'pattern' at " + path_ + " (\"" + p_ + "\"): " + what);
    }
    bool more() const { return pos_ < p_.size(); }
    char peek() const { return p_[pos_]; }

    int state() {
        b_.budget().add_symbols(1);  // a pattern repeated inside a repetition grows fast
        nfa_.out.emplace_back();
        return int(nfa_.out.size() - 1);
    }
    void edge(int from, int to, int cls = -1) { nfa_.out[size_t(from)].push_back({to, cls}); }

    Fragment alternation() {
        std::vector<Fragment> alts;
        alts.push_back(concatenation());
        while (more() && peek() == '|') {
            if (depth_ == 0) top_level_alternation_ = true;
            ++pos_;
            alts.push_back(concatenation());
        }
        if (alts.size() == 1) return alts[0];
        Fragment f{state(), state()};
        for (const Fragment& a : alts) {
            edge(f.start, a.start);
            edge(a.end, f.end);
        }
        return f;
    }

    Fragment concatenation() {
        const int start = state();
        int at = start;
        while (more() && peek() != '|' && peek() != ')') {
            Fragment f = quantified();
            edge(at, f.start);
            at = f.end;
        }
        return {start, at};
    }

    int read_int() {
        size_t start = pos_;
        while (more() && peek() >= '0' && peek() <= '9') ++pos_;
        if (start == pos_) fail("expected a number in {}");
        int v = std::stoi(p_.substr(start, std::min<size_t>(pos_ - start, 6)));
        if (v > 1000) fail("a repetition count above 1000");
        return v;
    }

    // A copy of `f`, whose states are [first, end of the NFA) and not wired to anything else yet.
    Fragment copy(Fragment f, int first) {
        const int last = int(nfa_.out.size());
        const int base = int(nfa_.out.size());
        for (int s = first; s < last; ++s) state();
        for (int s = first; s < last; ++s)
            for (const auto& e : nfa_.out[size_t(s)]) edge(base + s - first, base + e.to - first, e.cls);
        return {base + f.start - first, base + f.end - first};
    }

    Fragment quantified() {
        const int first = int(nfa_.out.size());
        Fragment f = atom();
        while (more()) {
            char c = peek();
            int min = 0, max = -1;
            if (c == '*') {
                ++pos_;
            } else if (c == '+') {
                ++pos_;
                min = 1;
            } else if (c == '?') {
                ++pos_;
                max = 1;
            } else if (c == '{') {
                ++pos_;
                min = read_int();
                max = min;
                if (more() && peek() == ',') {
                    ++pos_;
                    max = more() && peek() == '}' ? -1 : read_int();
                }
                if (!more() || peek() != '}') fail("expected '}'");
                ++pos_;
                if (max >= 0 && max < min) fail("{n,m} with m < n");
            } else {
                break;
            }
            if (more() && peek() == '?') ++pos_;  // lazy: the same set of strings
            if (more() && peek() == '+') fail("possessive quantifiers");
            // Every copy is made before any is wired (wiring adds edges leaving the range).
            const int copies = max < 0 ? std::max(min, 1) : max;
            std::vector<Fragment> parts = {f};
            for (int i = 1; i < copies; ++i) parts.push_back(copy(f, first));
            Fragment r{state(), -1};
            int at = r.start;
            for (int i = 0; i < min; ++i) {
                edge(at, parts[size_t(i)].start);
                at = parts[size_t(i)].end;
            }
            r.end = state();
            if (max < 0) {
                // then the last copy any number of times
                const Fragment& loop = parts.back();
                if (min > 0) edge(loop.end, loop.start);
                else {
                    edge(at, loop.start);
                    edge(loop.end, at);
                }
            } else {
                // then up to max - min more, each optional: stop after any of them
                for (int i = min; i < max; ++i) {
                    edge(at, r.end);
                    edge(at, parts[size_t(i)].start);
                    at = parts[size_t(i)].end;
                }
            }
            edge(at, r.end);
            f = r;
        }
        return f;
    }

    // One UTF-8 character starting at pos_ (the pattern is valid UTF-8: it came from JSON).
    std::string utf8_char() {
        unsigned char c = (unsigned char)p_[pos_];
        size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        std::string s = p_.substr(pos_, n);
        pos_ += n;
        return s;
    }

    static CharSet single(const std::string& ch) {
        CharSet s;
        if (ch.size() == 1) s.ascii.add((unsigned char)ch[0]);
        else s.non_ascii.push_back(ch);
        return s;
    }

    static void add_class_escape(char e, CharSet& s) {
        auto add = [&](unsigned lo, unsigned hi) { s.ascii.add_range(lo, hi); };
        CharSet t;
        switch (e) {
            case 'd': add('0', '9'); return;
            case 'w': add('0', '9'), add('a', 'z'), add('A', 'Z'), add('_', '_'); return;
            case 's': add(' ', ' '), add('\t', '\r'); return;
            default: break;
        }
        // \D \W \S: the complement (all non-ASCII characters included).
        add_class_escape(char(e - 'A' + 'a'), t);
        for (unsigned c = 0; c < 128; ++c)
            if (!t.ascii.has(c)) s.ascii.add(c);
        s.all_non_ascii = true;
    }

    // After a backslash: a character (as UTF-8) or, for class escapes, fills `cls`.
    std::string escape(CharSet* cls) {
        if (!more()) fail("a trailing backslash");
        char e = p_[pos_++];
        switch (e) {
            case 'd': case 'w': case 's': case 'D': case 'W': case 'S':
                if (!cls) fail("internal: class escape");
                add_class_escape(e, *cls);
                return {};
            case 'n': return "\n";
            case 't': return "\t";
            case 'r': return "\r";
            case 'f': return "\f";
            case 'v': return "\v";
            case 'u': {
                if (pos_ + 4 > p_.size()) fail("a short \\u escape");
                unsigned cp = unsigned(std::stoul(p_.substr(pos_, 4), nullptr, 16));
                pos_ += 4;
                std::string out;
                if (cp < 0x80) out += char(cp);
                else if (cp < 0x800) out += char(0xC0 | (cp >> 6)), out += char(0x80 | (cp & 0x3F));
                else {
                    if (cp >= 0xD800 && cp <= 0xDFFF) fail("surrogate \\u escapes");
                    out += char(0xE0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
                }
                return out;
            }
            default:
                if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
                    fail(std::string("the escape \\") + e);
                return std::string(1, e);
        }
    }

    CharSet bracket_class() {
        CharSet s;
        bool negate = more() && peek() == '^';
        if (negate) ++pos_;
        bool first = true;
        while (more() && (peek() != ']' || first)) {
            first = false;
            std::string lo;
            if (peek() == '\\') {
                ++pos_;
                lo = escape(&s);
                if (lo.empty()) continue;  // a class escape
            } else {
                lo = utf8_char();
            }
            if (more() && peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
                ++pos_;
                std::string hi;
                if (peek() == '\\') {
                    ++pos_;
                    hi = escape(nullptr);
                } else {
                    hi = utf8_char();
                }
                if (lo.size() != 1 || hi.size() != 1) fail("ranges of non-ASCII characters");
                if ((unsigned char)hi[0] < (unsigned char)lo[0]) fail("a reversed range");
                s.ascii.add_range((unsigned char)lo[0], (unsigned char)hi[0]);
            } else if (lo.size() == 1) {
                s.ascii.add((unsigned char)lo[0]);
            } else {
                s.non_ascii.push_back(lo);
            }
        }
        if (!more()) fail("an unclosed '['");
        ++pos_;
        if (negate) {
            if (!s.non_ascii.empty()) fail("negated classes with non-ASCII characters");
            CharSet n;
            for (unsigned c = 0; c < 128; ++c)
                if (!s.ascii.has(c)) n.ascii.add(c);
            n.all_non_ascii = !s.all_non_ascii;
            return n;
        }
        return s;
    }

    // The encodings of the characters in `s`, as one rule.
    Sequence emit(const CharSet& s) {
        std::vector<Sequence> alts;
        ByteSet direct;
        for (unsigned c = 0; c < 128; ++c) {
            if (!s.ascii.has(c)) continue;
            if (raw_) {
                direct.add(c);
            } else if (c == '"' || c == '\\') {
                alts.push_back({b_.byte('\\'), b_.byte((unsigned char)c)});
            } else if (c < 0x20) {
                static const char* short_escape[32] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                       "b",     "t",     "n",     nullptr, "f",     "r"};
                char buf[8];
                std::snprintf(buf, sizeof buf, "u%04x", c);
                const char* e = c < 14 && short_escape[c] ? short_escape[c] : buf;
                alts.push_back(concat({{b_.byte('\\')}, b_.literal(e)}));
            } else {
                direct.add(c);
            }
        }
        if (!direct.empty()) alts.push_back({b_.bytes(direct)});
        if (s.all_non_ascii) alts.push_back({GrammarBuilder::ref(j_.utf8_multibyte())});
        for (const auto& ch : s.non_ascii) alts.push_back(b_.literal(ch));
        if (alts.empty()) fail("an empty character class");
        if (alts.size() == 1) return alts[0];
        return {GrammarBuilder::ref(b_.rule("regex_class", alts))};
    }

    Fragment atom() {
        char c = peek();
        if (c == '(') {
            ++pos_;
            if (more() && peek() == '?') {
                if (pos_ + 1 < p_.size() && p_[pos_ + 1] == ':') pos_ += 2;
                else fail("lookaround and named groups");
            }
            ++depth_;
            Fragment inner = alternation();
            --depth_;
            if (!more() || peek() != ')') fail("an unclosed '('");
            ++pos_;
            return inner;
        }
        if (c == '[') {
            ++pos_;
            return character(emit(bracket_class()));
        }
        if (c == '.') {
            ++pos_;
            CharSet s;
            for (unsigned x = 0; x < 128; ++x)
                if (x != '\n' && x != '\r') s.ascii.add(x);
            s.all_non_ascii = true;
            return character(emit(s));
        }
        if (c == '^' || c == '$') fail("anchors inside the pattern");
        if (c == '*' || c == '+' || c == '?' || c == '{') fail(std::string("nothing to repeat before '") + c + "'");
        if (c == '\\') {
            ++pos_;
            CharSet s;
            std::string ch = escape(&s);
            if (ch.empty()) return character(emit(s));
            if (ch == "b" || ch == "B") fail("word boundaries");
            return character(emit(single(ch)));
        }
        return character(emit(single(utf8_char())));
    }

    // One character of the class written by `seq`.
    Fragment character(Sequence seq) {
        Fragment f{state(), state()};
        edge(f.start, f.end, int(nfa_.classes.size()));
        nfa_.classes.push_back(std::move(seq));
        return f;
    }

    // The rules for the strings from `start` to `end` of min_length..max_length characters
    // (max_length < 0: no upper limit). A rule per (NFA state, characters so far), counting up
    // to max_length, or up to min_length when there is no maximum (more counts alike then);
    // each rule's alternatives are the characters leaving the state's empty-move closure, so
    // no rule starts with a reference (no left recursion). Only pairs that are reachable and
    // can still end within the limits get a rule.
    int32_t emit_rules(int start, int end, int min_length, int max_length) {
        const int cap = max_length >= 0 ? max_length : min_length;
        auto next_count = [&](int c) { return max_length >= 0 ? c + 1 : std::min(c + 1, min_length); };
        struct Closure {
            std::vector<std::pair<int, int>> moves;  // (class, to)
            bool accepts = false;
        };
        std::vector<int> closure_of(nfa_.out.size(), -1);
        std::vector<Closure> closures;
        auto closure = [&](int q) -> const Closure& {
            if (closure_of[size_t(q)] < 0) {
                Closure c;
                std::vector<char> seen(nfa_.out.size(), 0);
                std::vector<int> todo = {q};
                seen[size_t(q)] = 1;
                while (!todo.empty()) {
                    int s = todo.back();
                    todo.pop_back();
                    if (s == end) c.accepts = true;
                    for (const auto& e : nfa_.out[size_t(s)]) {
                        if (e.cls >= 0) {
                            if (std::find(c.moves.begin(), c.moves.end(), std::make_pair(e.cls, e.to)) == c.moves.end())
                                c.moves.emplace_back(e.cls, e.to);
                        } else if (!seen[size_t(e.to)]) {
                            seen[size_t(e.to)] = 1;
                            todo.push_back(e.to);
                        }
                    }
                }
                closure_of[size_t(q)] = int(closures.size());
                closures.push_back(std::move(c));
                b_.budget().tick();
            }
            return closures[size_t(closure_of[size_t(q)])];
        };
        // Reachable (state, count) pairs, then which of them can end.
        auto key = [&](int q, int c) { return int64_t(c) * int64_t(nfa_.out.size()) + q; };
        std::unordered_map<int64_t, size_t> index;
        std::vector<std::pair<int, int>> pairs;
        std::vector<std::vector<size_t>> before;  // pairs that move into each pair
        auto visit = [&](int q, int c) {
            auto [it, added] = index.emplace(key(q, c), pairs.size());
            if (added) {
                pairs.emplace_back(q, c);
                before.emplace_back();
            }
            return it->second;
        };
        visit(start, 0);
        for (size_t i = 0; i < pairs.size(); ++i) {
            auto [q, c] = pairs[i];
            if (max_length >= 0 && c >= cap) continue;
            for (const auto& [cls, to] : closure(q).moves) before[visit(to, next_count(c))].push_back(i);
        }
        std::vector<char> live(pairs.size(), 0);
        std::vector<size_t> todo;
        for (size_t i = 0; i < pairs.size(); ++i)
            if (closure(pairs[i].first).accepts && pairs[i].second >= min_length) {
                live[i] = 1;
                todo.push_back(i);
            }
        while (!todo.empty()) {
            size_t i = todo.back();
            todo.pop_back();
            for (size_t from : before[i])
                if (!live[from]) {
                    live[from] = 1;
                    todo.push_back(from);
                }
        }
        if (!live[0])
            throw GrammarError("pattern", path_, "unsupported JSON schema: 'pattern' at " + path_ + ": no string of " +
                                                     std::to_string(min_length) + ".." +
                                                     (max_length >= 0 ? std::to_string(max_length) : std::string("any")) +
                                                     " characters matches \"" + p_ + "\"");
        std::vector<int32_t> rule(pairs.size(), -1);
        for (size_t i = 0; i < pairs.size(); ++i)
            if (live[i]) rule[i] = b_.new_rule("pattern");
        for (size_t i = 0; i < pairs.size(); ++i) {
            if (!live[i]) continue;
            auto [q, c] = pairs[i];
            const Closure& cl = closure(q);
            if (cl.accepts && c >= min_length) b_.add_alternative(rule[i], {});
            if (max_length >= 0 && c >= cap) continue;
            for (const auto& [cls, to] : cl.moves) {
                size_t j = index.at(key(to, next_count(c)));
                if (!live[j]) continue;
                Sequence alt = nfa_.classes[size_t(cls)];
                alt.push_back(GrammarBuilder::ref(rule[j]));
                b_.add_alternative(rule[i], std::move(alt));
            }
        }
        return rule[0];
    }

    JsonRules& j_;
    GrammarBuilder& b_;
    std::string p_;
    bool raw_;
    std::string path_;
    size_t pos_ = 0;
    int depth_ = 0;
    bool top_level_alternation_ = false;
    Nfa nfa_;
};

}  // namespace

int32_t compile_pattern(JsonRules& json, const std::string& pattern, bool raw, const std::string& path, int min_length,
                        int max_length) {
    return PatternCompiler(json, pattern, raw, path).compile(min_length, max_length);
}

}  // namespace k3::grammar
