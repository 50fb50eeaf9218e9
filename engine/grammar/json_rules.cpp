// JSON text as grammar rules (see json_rules.h). Rules are made on first use, so a grammar
// holds only what its schema needs.
#include "grammar/json_rules.h"

#include <string>
#include <vector>

namespace k3::grammar {

namespace {

ByteSet range(unsigned lo, unsigned hi) {
    ByteSet s;
    s.add_range(lo, hi);
    return s;
}

enum class Fraction { None, Any, Zero, NonZero };

constexpr int kMaxDigits = 18;

}  // namespace

Sequence JsonRules::digit() { return {b.bytes(range('0', '9'))}; }

int32_t JsonRules::digits_star() {
    // Runs of digits are capped (kMaxDigits after the first), so that every number written
    // fits an IEEE double's range: JSON parsers differ on what they do beyond it.
    if (digits_ < 0) digits_ = b.repeat(digit(), 0, kMaxDigits - 1, "digits");
    return digits_;
}

int32_t JsonRules::utf8_multibyte() {
    if (multibyte_ >= 0) return multibyte_;
    Symbol cont = b.bytes(range(0x80, 0xBF));
    // Well-formed UTF-8 (Unicode table 3-7): no overlongs, no surrogates, nothing past U+10FFFF.
    multibyte_ = b.rule("utf8", {
                                    {b.bytes(range(0xC2, 0xDF)), cont},
                                    {b.byte(0xE0), b.bytes(range(0xA0, 0xBF)), cont},
                                    {b.bytes(range(0xE1, 0xEC)), cont, cont},
                                    {b.byte(0xED), b.bytes(range(0x80, 0x9F)), cont},
                                    {b.bytes(range(0xEE, 0xEF)), cont, cont},
                                    {b.byte(0xF0), b.bytes(range(0x90, 0xBF)), cont, cont},
                                    {b.bytes(range(0xF1, 0xF3)), cont, cont, cont},
                                    {b.byte(0xF4), b.bytes(range(0x80, 0x8F)), cont, cont},
                                });
    return multibyte_;
}

int32_t JsonRules::string_char(bool raw) {
    int32_t& slot = raw ? raw_char_ : char_;
    if (slot >= 0) return slot;
    if (raw) {
        // XTML argument text: any character; tabs and newlines included, other controls not.
        ByteSet ascii = range(0x20, 0x7F);
        ascii.add('\t');
        ascii.add('\n');
        ascii.add('\r');
        slot = b.rule("raw_char", {{b.bytes(ascii)}, {GrammarBuilder::ref(utf8_multibyte())}});
        return slot;
    }
    ByteSet plain = range(0x20, 0x7F);
    ByteSet simple_escape;
    for (unsigned char c : std::string("\"\\/bfnrt")) simple_escape.add(c);
    plain = [&] {
        ByteSet s = plain;
        s.bits[0x22 >> 6] &= ~(uint64_t(1) << (0x22 & 63));  // '"'
        s.bits[0x5C >> 6] &= ~(uint64_t(1) << (0x5C & 63));  // '\'
        return s;
    }();
    ByteSet hex = range('0', '9');
    hex.add_range('a', 'f');
    hex.add_range('A', 'F');
    // \uXXXX without the D800-DFFF block (a lone surrogate is not a character); the first hex
    // digit excludes D/d, which also drops U+D000-U+D7FF: those can be written as UTF-8.
    ByteSet hex_no_d = range('0', '9');
    hex_no_d.add_range('a', 'c');
    hex_no_d.add_range('e', 'f');
    hex_no_d.add_range('A', 'C');
    hex_no_d.add_range('E', 'F');
    Symbol h = b.bytes(hex);
    slot = b.rule("char", {
                              {b.bytes(plain)},
                              {GrammarBuilder::ref(utf8_multibyte())},
                              {b.byte('\\'), b.bytes(simple_escape)},
                              {b.byte('\\'), b.byte('u'), b.bytes(hex_no_d), h, h, h},
                          });
    return slot;
}

int32_t JsonRules::string_content(int min, int max, bool raw) {
    Sequence ch = {GrammarBuilder::ref(string_char(raw))};
    if (min == 0 && max < 0) return b.star(ch, raw ? "raw_text" : "string_chars");
    return b.repeat(ch, min, max, "string_" + std::to_string(min) + "_" + std::to_string(max));
}

int32_t JsonRules::string() {
    if (string_ < 0) {
        Symbol quote = b.byte('"');
        string_ = b.rule("string", {{quote, GrammarBuilder::ref(string_content(0, -1, false)), quote}});
    }
    return string_;
}

int32_t JsonRules::integer() {
    if (integer_ < 0) {
        int32_t minus = b.optional({b.byte('-')}, "minus");
        int32_t natural = b.rule("natural", {{b.byte('0')}, {b.bytes(range('1', '9')), GrammarBuilder::ref(digits_star())}});
        integer_ = b.rule("integer", {{GrammarBuilder::ref(minus), GrammarBuilder::ref(natural)}});
    }
    return integer_;
}

int32_t JsonRules::number() {
    if (number_ < 0) {
        Sequence digits1 = concat({digit(), {GrammarBuilder::ref(digits_star())}});
        int32_t fraction = b.optional(concat({{b.byte('.')}, digits1}), "fraction");
        ByteSet e;
        e.add('e');
        e.add('E');
        ByteSet sign;
        sign.add('+');
        sign.add('-');
        int32_t exp_sign = b.optional({b.bytes(sign)}, "exponent_sign");
        // Two exponent digits at most: with at most 18 digits before the point, |x| < 1e118.
        int32_t exponent = b.optional({b.bytes(e), GrammarBuilder::ref(exp_sign), digit()[0],
                                       GrammarBuilder::ref(b.optional(digit(), "exponent_digit"))},
                                      "exponent");
        number_ = b.rule("number", {{GrammarBuilder::ref(integer()), GrammarBuilder::ref(fraction),
                                     GrammarBuilder::ref(exponent)}});
    }
    return number_;
}

int32_t JsonRules::boolean() {
    if (boolean_ < 0) boolean_ = b.rule("boolean", {b.literal("true"), b.literal("false")});
    return boolean_;
}

int32_t JsonRules::null_value() {
    if (null_ < 0) null_ = b.rule("null", {b.literal("null")});
    return null_;
}

int32_t JsonRules::value() {
    if (value_ >= 0) return value_;
    value_ = b.new_rule("value");
    for (int32_t r : {object(), array(), string(), number(), boolean(), null_value()})
        b.add_alternative(value_, {GrammarBuilder::ref(r)});
    return value_;
}

int32_t JsonRules::object() {
    if (object_ >= 0) return object_;
    object_ = b.new_rule("object");
    int32_t v = value();  // (re-enters object(): object_ is already set)
    Sequence member = {GrammarBuilder::ref(string()), b.byte(':'), GrammarBuilder::ref(v)};
    int32_t more = b.star(concat({{b.byte(',')}, member}), "members");
    b.add_alternative(object_, {b.byte('{'), b.byte('}')});
    b.add_alternative(object_, concat({{b.byte('{')}, member, {GrammarBuilder::ref(more), b.byte('}')}}));
    return object_;
}

int32_t JsonRules::array() {
    if (array_ >= 0) return array_;
    array_ = b.new_rule("array");
    int32_t v = value();
    int32_t more = b.star({b.byte(','), GrammarBuilder::ref(v)}, "elements");
    b.add_alternative(array_, {b.byte('['), b.byte(']')});
    b.add_alternative(array_, {b.byte('['), GrammarBuilder::ref(v), GrammarBuilder::ref(more), b.byte(']')});
    return array_;
}

namespace {

// Decimal strings (no leading zeros) between x and y, both of the same length, as sequences of
// digit classes: split at the first differing digit (the classic range-to-regex construction).
void same_length_range(GrammarBuilder& b, const std::string& x, const std::string& y, Sequence prefix,
                       std::vector<Sequence>& out) {
    if (x.empty()) {
        out.push_back(std::move(prefix));
        return;
    }
    auto tail_all = [](const std::string& s, char c) { return s.find_first_not_of(c, 1) == std::string::npos; };
    auto digit_range = [&](char lo, char hi) { return b.bytes(range((unsigned char)lo, (unsigned char)hi)); };
    if (tail_all(x, '0') && tail_all(y, '9')) {
        prefix.push_back(digit_range(x[0], y[0]));
        for (size_t i = 1; i < x.size(); ++i) prefix.push_back(digit_range('0', '9'));
        out.push_back(std::move(prefix));
        return;
    }
    if (x[0] == y[0]) {
        prefix.push_back(b.byte((unsigned char)x[0]));
        same_length_range(b, x.substr(1), y.substr(1), std::move(prefix), out);
        return;
    }
    std::string nines(x.size() - 1, '9'), zeros(x.size() - 1, '0');
    Sequence low = prefix;
    low.push_back(b.byte((unsigned char)x[0]));
    same_length_range(b, x.substr(1), nines, std::move(low), out);
    if (x[0] + 1 <= y[0] - 1) {
        Sequence mid = prefix;
        mid.push_back(digit_range(char(x[0] + 1), char(y[0] - 1)));
        for (size_t i = 1; i < x.size(); ++i) mid.push_back(digit_range('0', '9'));
        out.push_back(std::move(mid));
    }
    Sequence high = prefix;
    high.push_back(b.byte((unsigned char)y[0]));
    same_length_range(b, zeros, y.substr(1), std::move(high), out);
}

// Natural numbers in [lo, hi] (hi < 0: unbounded) in decimal without leading zeros.
void natural_range(GrammarBuilder& b, int32_t digits_star, uint64_t lo, int64_t hi, const Sequence& suffix,
                   std::vector<Sequence>& out) {
    if (hi >= 0 && lo > uint64_t(hi)) return;
    std::string a = std::to_string(lo);
    size_t max_len = hi >= 0 ? std::to_string(hi).size() : a.size();
    std::vector<Sequence> parts;
    for (size_t n = a.size(); n <= max_len; ++n) {
        std::string x = a;
        if (n != a.size()) {
            x.assign(n, '0');  // 10^(n-1)
            x[0] = '1';
        }
        std::string y = (hi >= 0 && n == max_len) ? std::to_string(hi) : std::string(n, '9');
        same_length_range(b, x, y, {}, parts);
    }
    if (hi < 0) {
        // Every number with more digits than lo.
        Sequence longer = {b.bytes(range('1', '9'))};
        for (size_t i = 0; i < a.size(); ++i) longer.push_back(b.bytes(range('0', '9')));
        longer.push_back(GrammarBuilder::ref(digits_star));
        parts.push_back(std::move(longer));
    }
    for (auto& p : parts) out.push_back(concat({p, suffix}));
}

}  // namespace

int32_t JsonRules::bounded_number(bool integral, std::optional<NumericBound> lo, std::optional<NumericBound> hi) {
    // A number is sign, integer part i and fraction f (no exponent). With integral bounds the
    // fraction only matters at the bounds: v >= L iff i >= L; v > L iff i > L, or i == L with
    // f > 0; v <= H iff i < H, or i == H with f == 0; v < H iff i < H. Negative numbers are
    // the same over magnitudes with the bounds mirrored.
    Sequence digits1 = concat({digit(), {GrammarBuilder::ref(digits_star())}});
    auto fraction = [&](Fraction kind) -> std::optional<Sequence> {
        if (integral) return kind == Fraction::NonZero ? std::nullopt : std::optional<Sequence>(Sequence{});
        switch (kind) {
            case Fraction::Any: return Sequence{GrammarBuilder::ref(b.optional(concat({{b.byte('.')}, digits1}), "fraction"))};
            case Fraction::Zero:
                return Sequence{GrammarBuilder::ref(b.optional({b.byte('.'), b.byte('0'), GrammarBuilder::ref(b.star({b.byte('0')}, "zeros"))}, "zero_fraction"))};
            case Fraction::NonZero:
                return Sequence{b.byte('.'), GrammarBuilder::ref(digits_star()), b.bytes(range('1', '9')),
                                GrammarBuilder::ref(digits_star())};
            default: return std::nullopt;
        }
    };
    auto meet = [](Fraction a, Fraction c) {
        if (a == Fraction::None || c == Fraction::None) return Fraction::None;
        if (a == Fraction::Any) return c;
        if (c == Fraction::Any || a == c) return a;
        return Fraction::None;
    };
    // Magnitudes m = i.f with lo_m (<|<=) m (<|<=) hi_m (hi_m < 0: unbounded).
    auto magnitudes = [&](int64_t lo_m, bool lo_excl, int64_t hi_m, bool hi_excl, const Sequence& sign,
                          std::vector<Sequence>& out) {
        auto emit = [&](uint64_t from, int64_t to, Fraction kind) {
            auto frac = fraction(kind);
            if (!frac) return;
            std::vector<Sequence> parts;
            natural_range(b, digits_star(), from, to, *frac, parts);
            for (auto& p : parts) out.push_back(concat({sign, p}));
        };
        if (hi_m >= 0 && lo_m > hi_m) return;
        Fraction at_lo = lo_excl ? Fraction::NonZero : Fraction::Any;
        Fraction at_hi = hi_excl ? Fraction::None : Fraction::Zero;
        if (hi_m >= 0 && lo_m == hi_m) {
            emit(uint64_t(lo_m), lo_m, meet(at_lo, at_hi));
            return;
        }
        emit(uint64_t(lo_m), lo_m, at_lo);
        if (hi_m < 0) emit(uint64_t(lo_m) + 1, -1, Fraction::Any);
        else {
            if (hi_m - 1 >= lo_m + 1) emit(uint64_t(lo_m) + 1, hi_m - 1, Fraction::Any);
            emit(uint64_t(hi_m), hi_m, at_hi);
        }
    };
    std::vector<Sequence> alts;
    // v >= 0 (or the part of the range that is).
    if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {
        bool lo_positive = lo && lo->value >= 0;
        magnitudes(lo_positive ? lo->value : 0, lo_positive && lo->exclusive, hi ? hi->value : -1,
                   hi && hi->exclusive, {}, alts);
    }
    // v < 0: magnitudes in (max(-hi, 0), -lo], never "-0".
    if (!lo || lo->value < 0) {
        bool hi_negative = hi && hi->value < 0;
        magnitudes(hi_negative ? -hi->value : 0, hi_negative ? hi->exclusive : true, lo ? -lo->value : -1,
                   lo && lo->exclusive, {b.byte('-')}, alts);
    }
    return b.rule(integral ? "bounded_integer" : "bounded_number", alts);
}

}  // namespace k3::grammar
