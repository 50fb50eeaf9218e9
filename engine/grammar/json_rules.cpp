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

// Natural numbers in [lo, hi] (no hi: unbounded), decimal text without leading zeros, each
// followed by `suffix`.
void natural_range(GrammarBuilder& b, int32_t digits_star, const std::string& lo, const std::optional<std::string>& hi,
                   const Sequence& suffix, std::vector<Sequence>& out) {
    auto less = [](const std::string& x, const std::string& y) { return x.size() != y.size() ? x.size() < y.size() : x < y; };
    if (hi && less(*hi, lo)) return;
    size_t max_len = hi ? hi->size() : lo.size();
    std::vector<Sequence> parts;
    for (size_t n = lo.size(); n <= max_len; ++n) {
        std::string x = lo;
        if (n != lo.size()) {
            x.assign(n, '0');  // 10^(n-1)
            x[0] = '1';
        }
        std::string y = (hi && n == max_len) ? *hi : std::string(n, '9');
        same_length_range(b, x, y, {}, parts);
    }
    if (!hi) {
        // Every number with more digits than lo.
        Sequence longer = {b.bytes(range('1', '9'))};
        for (size_t i = 0; i < lo.size(); ++i) longer.push_back(b.bytes(range('0', '9')));
        longer.push_back(GrammarBuilder::ref(digits_star));
        parts.push_back(std::move(longer));
    }
    for (auto& p : parts) out.push_back(concat({p, suffix}));
}

}  // namespace

int32_t JsonRules::fraction_digits(const std::optional<std::string>& lo, const std::optional<std::string>& hi, int left,
                                   bool need_digit) {
    // Digit strings s of at most `left` digits with 0.s >= 0.lo and 0.s <= 0.hi (lo, hi: the
    // bounds' remaining fraction digits; no lo: no lower limit; hi "" : only zeros may follow).
    // Digit by digit: a digit above lo's next frees the lower side, equal keeps it, below is
    // out; the same mirrored for hi. Each bound is one chain of rules, so this is linear in
    // the bounds' digits; the same call (a bound's run of zeros, digits after either side is
    // free) makes its rule once.
    std::string key = (lo ? "L" + *lo : std::string("-")) + (hi ? "H" + *hi : std::string("-")) + ":" +
                      std::to_string(left) + (need_digit ? "+" : "");
    if (auto it = fraction_rules_.find(key); it != fraction_rules_.end()) return it->second;
    std::vector<Sequence> alts;
    if (!need_digit && !lo) alts.push_back({});
    if (left > 0) {
        if (!lo && !hi) {
            alts.push_back({b.bytes(range('0', '9')), GrammarBuilder::ref(fraction_digits(std::nullopt, std::nullopt, left - 1, false))});
        } else {
            const int lo_digit = lo ? (*lo)[0] - '0' : 0, hi_digit = hi ? (hi->empty() ? 0 : (*hi)[0] - '0') : 9;
            for (int c = lo_digit; c <= hi_digit;) {
                // The run of digits from c that leaves both sides in the same state.
                int last = c;
                if (!(lo && c == lo_digit) && !(hi && c == hi_digit)) last = hi ? hi_digit - 1 : 9;
                std::optional<std::string> next_lo, next_hi;
                if (lo && c == lo_digit && lo->size() > 1) next_lo = lo->substr(1);
                if (hi && c == hi_digit) next_hi = hi->empty() ? std::string() : hi->substr(1);
                int32_t rest = fraction_digits(next_lo, next_hi, left - 1, false);
                if (rest >= 0) alts.push_back({b.bytes(range('0' + unsigned(c), '0' + unsigned(last))), GrammarBuilder::ref(rest)});
                c = last + 1;
            }
        }
    }
    return fraction_rules_[key] = alts.empty() ? -1 : b.rule("fraction_range", alts);
}

int32_t JsonRules::bounded_number(bool integral, std::optional<Decimal> lo, std::optional<Decimal> hi) {
    // A number is sign, integer part i and fraction f (no exponent), lo <= v <= hi (inclusive
    // bounds with at most kMaxFractionDigits fraction digits; integers for integral). Over the
    // magnitudes m = i.f in [a, b]: i == a's integer part with f >= a's fraction, integer parts
    // strictly between with any f, i == b's with f <= b's (one case when they are equal).
    // Negative numbers are the same over magnitudes with the bounds mirrored; "-0" is never
    // written (a negative magnitude is at least one unit of the last digit).
    const int digits = integral ? 0 : kMaxFractionDigits;
    // The optional fraction part ".ddd" of a number whose integer part equals a bound's (lo/hi
    // the fraction digits to respect; nullopt: no limit on that side).
    auto fraction = [&](const std::optional<std::string>& f_lo, const std::optional<std::string>& f_hi) -> std::optional<Sequence> {
        std::vector<Sequence> alts;
        if (!f_lo) alts.push_back({});  // no fraction: f == 0
        if (digits > 0) {
            int32_t rest = fraction_digits(f_lo, f_hi, digits, true);
            if (rest >= 0) alts.push_back({b.byte('.'), GrammarBuilder::ref(rest)});
        }
        if (alts.empty()) return std::nullopt;
        if (alts.size() == 1) return alts[0];
        return Sequence{GrammarBuilder::ref(b.rule("fraction_part", alts))};
    };
    auto lower_fraction = [](const Decimal& d) { return d.fraction.empty() ? std::nullopt : std::optional<std::string>(d.fraction); };
    auto magnitudes = [&](const Decimal& a, const std::optional<Decimal>& bnd, const Sequence& sign, std::vector<Sequence>& out) {
        if (bnd && compare(a, *bnd) > 0) return;
        auto emit = [&](const std::string& from, const std::optional<std::string>& to, std::optional<Sequence> frac) {
            if (!frac) return;
            std::vector<Sequence> parts;
            natural_range(b, digits_star(), from, to, *frac, parts);
            for (auto& p : parts) out.push_back(concat({sign, p}));
        };
        if (bnd && a.integer == bnd->integer) {
            emit(a.integer, a.integer, fraction(lower_fraction(a), bnd->fraction));
            return;
        }
        emit(a.integer, a.integer, fraction(lower_fraction(a), std::nullopt));
        if (!bnd) {
            emit(plus_one(a.integer), std::nullopt, fraction(std::nullopt, std::nullopt));
            return;
        }
        std::string below = minus_one(bnd->integer), above = plus_one(a.integer);
        if (above.size() < below.size() || (above.size() == below.size() && above <= below))
            emit(above, below, fraction(std::nullopt, std::nullopt));
        emit(bnd->integer, bnd->integer, fraction(std::nullopt, bnd->fraction));
    };
    const Decimal zero;
    Decimal unit;  // the least positive number written
    if (integral) unit.integer = "1";
    else unit.fraction = std::string(size_t(digits) - 1, '0') + "1";
    std::vector<Sequence> alts;
    if (!hi || !hi->negative) {
        Decimal a = lo && !lo->negative ? *lo : zero;
        magnitudes(a, hi, {}, alts);
    }
    if (!lo || lo->negative) {
        Decimal a = hi && hi->negative ? negated(*hi) : unit;
        std::optional<Decimal> bnd;
        if (lo) bnd = negated(*lo);
        magnitudes(a, bnd, {b.byte('-')}, alts);
    }
    return b.rule(integral ? "bounded_integer" : "bounded_number", alts);
}

}  // namespace k3::grammar
