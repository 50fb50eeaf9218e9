// Decimal bounds for the number grammar (see decimal_bound.h).
#include "grammar/decimal_bound.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

namespace k3::grammar {

namespace {

Decimal normalized(Decimal d) {
    size_t lead = d.integer.find_first_not_of('0');
    d.integer = lead == std::string::npos ? std::string(1, '0') : d.integer.substr(lead);
    size_t last = d.fraction.find_last_not_of('0');
    d.fraction = last == std::string::npos ? "" : d.fraction.substr(0, last + 1);
    if (d.integer == "0" && d.fraction.empty()) d.negative = false;
    return d;
}

// Magnitudes compared.
int compare_magnitude(const Decimal& a, const Decimal& b) {
    if (a.integer.size() != b.integer.size()) return a.integer.size() < b.integer.size() ? -1 : 1;
    if (int c = a.integer.compare(b.integer)) return c < 0 ? -1 : 1;
    size_t n = std::max(a.fraction.size(), b.fraction.size());
    for (size_t i = 0; i < n; ++i) {
        char x = i < a.fraction.size() ? a.fraction[i] : '0', y = i < b.fraction.size() ? b.fraction[i] : '0';
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

// |d| cut to `digits` fraction digits, and whether anything non-zero was cut off.
Decimal truncated(const Decimal& d, int digits, bool& cut) {
    Decimal t = d;
    cut = int(d.fraction.size()) > digits;
    if (cut) t.fraction = d.fraction.substr(0, size_t(digits));
    return normalized(t);
}

// |d| plus one unit of its `digits`-th fraction digit.
Decimal plus_unit(const Decimal& d, int digits) {
    std::string all = d.integer + d.fraction + std::string(size_t(digits) - d.fraction.size(), '0');
    all = plus_one(all);
    Decimal r;
    r.negative = d.negative;
    r.integer = all.substr(0, all.size() - size_t(digits));
    r.fraction = all.substr(all.size() - size_t(digits));
    return normalized(r);
}

}  // namespace

std::string plus_one(const std::string& n) {
    std::string s = n;
    for (size_t i = s.size(); i-- > 0;) {
        if (s[i] != '9') {
            ++s[i];
            return s;
        }
        s[i] = '0';
    }
    return "1" + s;
}

std::string minus_one(const std::string& n) {
    std::string s = n;
    for (size_t i = s.size(); i-- > 0;) {
        if (s[i] != '0') {
            --s[i];
            break;
        }
        s[i] = '9';
    }
    size_t lead = s.find_first_not_of('0');
    return lead == std::string::npos ? "0" : s.substr(lead);
}

Decimal exact_decimal(double v) {
    // Every finite double is a finite decimal: at most 309 digits before the point and 1074
    // after; glibc's printf writes them exactly.
    std::vector<char> buf(1500);
    std::snprintf(buf.data(), buf.size(), "%.1080f", v);
    return parse_decimal(buf.data());
}

Decimal parse_decimal(const std::string& text) {
    Decimal d;
    size_t i = 0;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) d.negative = text[i++] == '-';
    const size_t e = text.find_first_of("eE", i);
    const std::string mantissa = text.substr(i, e == std::string::npos ? std::string::npos : e - i);
    const long exponent = e == std::string::npos ? 0 : std::stol(text.substr(e + 1));
    const size_t dot = mantissa.find('.');
    std::string digits = mantissa.substr(0, dot);
    if (dot != std::string::npos) digits += mantissa.substr(dot + 1);
    // Where the point sits in `digits` once the exponent has moved it.
    const long point = long(dot == std::string::npos ? mantissa.size() : dot) + exponent;
    if (point <= 0) {
        d.integer.assign(1, '0');  // (not = "0": GCC 12 -Wrestrict, bug 105329)
        d.fraction = std::string(size_t(-point), '0') + digits;
    } else if (size_t(point) >= digits.size()) {
        d.integer = digits + std::string(size_t(point) - digits.size(), '0');
    } else {
        d.integer = digits.substr(0, size_t(point));
        d.fraction = digits.substr(size_t(point));
    }
    return normalized(d);
}

int compare(const Decimal& a, const Decimal& b) {
    if (a.negative != b.negative) return a.negative ? -1 : 1;
    int m = compare_magnitude(a, b);
    return a.negative ? -m : m;
}

Decimal negated(const Decimal& d) {
    Decimal n = d;
    n.negative = !d.negative;
    return normalized(n);
}

Decimal round_up(const Decimal& d, int digits) {
    bool cut = false;
    Decimal t = truncated(d, digits, cut);
    // Truncation moves a positive number down (one unit up restores >=) and a negative one up.
    return cut && !d.negative ? plus_unit(t, digits) : t;
}

Decimal round_down(const Decimal& d, int digits) { return negated(round_up(negated(d), digits)); }

namespace {

// The ways a validator may read the schema's value: as written (an integer exactly; a float as
// the shortest decimal of its double, which is what the client wrote, e.g. 0.1), as the exact
// value of its double (Python comparing an integer with a float) and as that double
// (JavaScript). The last two are the same decimal.
std::vector<Decimal> readings(const nlohmann::ordered_json& v) {
    std::vector<Decimal> r = {exact_decimal(v.get<double>())};
    if (v.is_number_unsigned()) r.push_back(parse_decimal(std::to_string(v.get<uint64_t>())));
    else if (v.is_number_integer()) r.push_back(parse_decimal(std::to_string(v.get<int64_t>())));
    else r.push_back(parse_decimal(v.dump()));
    return r;
}

}  // namespace

Decimal lower_bound(const nlohmann::ordered_json& v, bool exclusive, int fraction_digits) {
    const double as_double = v.get<double>();
    Decimal bound;
    if (exclusive) {
        // The next double up is above double(v) (so parsed text >= it is > double(v)) and above
        // v itself (v rounds to double(v), so no double lies strictly between them on v's side).
        bound = exact_decimal(std::nextafter(as_double, std::numeric_limits<double>::infinity()));
    } else {
        const auto r = readings(v);  // the tightest
        bound = *std::max_element(r.begin(), r.end(), [](const Decimal& a, const Decimal& b) { return compare(a, b) < 0; });
    }
    return round_up(bound, fraction_digits);
}

Decimal upper_bound(const nlohmann::ordered_json& v, bool exclusive, int fraction_digits) {
    const double as_double = v.get<double>();
    Decimal bound;
    if (exclusive) {
        bound = exact_decimal(std::nextafter(as_double, -std::numeric_limits<double>::infinity()));
    } else {
        const auto r = readings(v);  // the tightest
        bound = *std::min_element(r.begin(), r.end(), [](const Decimal& a, const Decimal& b) { return compare(a, b) < 0; });
    }
    return round_down(bound, fraction_digits);
}

}  // namespace k3::grammar
