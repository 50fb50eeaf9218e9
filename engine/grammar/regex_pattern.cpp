// A small recursive-descent regex compiler onto GrammarBuilder rules (see regex_pattern.h).
#include "grammar/regex_pattern.h"

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

class PatternCompiler {
public:
    PatternCompiler(JsonRules& json, const std::string& pattern, bool raw, const std::string& path)
        : j_(json), b_(json.b), p_(pattern), raw_(raw), path_(path) {}

    int32_t compile() {
        std::string body = p_;
        bool anchored_start = !body.empty() && body[0] == '^';
        bool anchored_end = body.size() >= 2 && body.back() == '$' && body[body.size() - 2] != '\\';
        if (body == "$" ) anchored_end = true;
        p_ = body.substr(anchored_start ? 1 : 0, body.size() - (anchored_start ? 1 : 0) - (anchored_end ? 1 : 0));
        pos_ = 0;
        int32_t top = alternation();
        if (pos_ != p_.size()) fail("unbalanced ')'");
        if ((anchored_start || anchored_end) && top_level_alternation_)
            fail("anchors with a top-level '|' (wrap the alternatives in a group: ^(a|b)$)");
        Sequence seq;
        int32_t any = j_.string_content(0, -1, raw_);
        if (!anchored_start) seq.push_back(GrammarBuilder::ref(any));
        seq.push_back(GrammarBuilder::ref(top));
        if (!anchored_end) seq.push_back(GrammarBuilder::ref(any));
        return b_.rule("pattern", {seq});
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw GrammarError("pattern", path_, "unsupported 'pattern' at " + path_ + " (\"" + p_ + "\"): " + what);
    }
    bool more() const { return pos_ < p_.size(); }
    char peek() const { return p_[pos_]; }

    int32_t alternation() {
        std::vector<Sequence> alts;
        alts.push_back(concatenation());
        while (more() && peek() == '|') {
            if (depth_ == 0) top_level_alternation_ = true;
            ++pos_;
            alts.push_back(concatenation());
        }
        return b_.rule("regex_alt", alts);
    }

    Sequence concatenation() {
        Sequence seq;
        while (more() && peek() != '|' && peek() != ')') {
            Sequence atom_seq = atom();
            atom_seq = quantified(std::move(atom_seq));
            seq.insert(seq.end(), atom_seq.begin(), atom_seq.end());
        }
        return seq;
    }

    int read_int() {
        size_t start = pos_;
        while (more() && peek() >= '0' && peek() <= '9') ++pos_;
        if (start == pos_) fail("expected a number in {}");
        int v = std::stoi(p_.substr(start, std::min<size_t>(pos_ - start, 6)));
        if (v > 1000) fail("a repetition count above 1000");
        return v;
    }

    Sequence quantified(Sequence atom_seq) {
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
            atom_seq = {GrammarBuilder::ref(b_.repeat(atom_seq, min, max, "regex_repeat"))};
        }
        return atom_seq;
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

    Sequence atom() {
        char c = peek();
        if (c == '(') {
            ++pos_;
            if (more() && peek() == '?') {
                if (pos_ + 1 < p_.size() && p_[pos_ + 1] == ':') pos_ += 2;
                else fail("lookaround and named groups");
            }
            ++depth_;
            int32_t inner = alternation();
            --depth_;
            if (!more() || peek() != ')') fail("an unclosed '('");
            ++pos_;
            return {GrammarBuilder::ref(inner)};
        }
        if (c == '[') {
            ++pos_;
            return emit(bracket_class());
        }
        if (c == '.') {
            ++pos_;
            CharSet s;
            for (unsigned x = 0; x < 128; ++x)
                if (x != '\n' && x != '\r') s.ascii.add(x);
            s.all_non_ascii = true;
            return emit(s);
        }
        if (c == '^' || c == '$') fail("anchors inside the pattern");
        if (c == '*' || c == '+' || c == '?' || c == '{') fail(std::string("nothing to repeat before '") + c + "'");
        if (c == '\\') {
            ++pos_;
            CharSet s;
            std::string ch = escape(&s);
            if (ch.empty()) return emit(s);
            if (ch == "b" || ch == "B") fail("word boundaries");
            return emit(single(ch));
        }
        return emit(single(utf8_char()));
    }

    JsonRules& j_;
    GrammarBuilder& b_;
    std::string p_;
    bool raw_;
    std::string path_;
    size_t pos_ = 0;
    int depth_ = 0;
    bool top_level_alternation_ = false;
};

}  // namespace

int32_t compile_pattern(JsonRules& json, const std::string& pattern, bool raw, const std::string& path) {
    return PatternCompiler(json, pattern, raw, path).compile();
}

}  // namespace k3::grammar
