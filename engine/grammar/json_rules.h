// Grammar pieces for JSON text (RFC 8259, no whitespace between tokens): strings with their
// escapes and well-formed UTF-8, numbers, numbers within integral bounds, and any value.
// "Raw" strings are the unquoted, unescaped text of an XTML string argument.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "grammar/decimal_bound.h"
#include "grammar/grammar_rules.h"

namespace k3::grammar {

class JsonRules {
public:
    explicit JsonRules(GrammarBuilder& b) : b(b) {}

    int32_t value();        // any JSON value
    int32_t object();       // any JSON object
    int32_t array();        // any JSON array
    int32_t string();       // any JSON string, quotes included
    int32_t number();       // any JSON number (at most 18 digits per run, exponent of 2 digits)
    int32_t integer();      // -?(0|[1-9][0-9]*)
    int32_t boolean();
    int32_t null_value();
    // One character of string content: as JSON encodes it (escaped), or raw (XTML argument text).
    int32_t string_char(bool raw);
    // Any non-ASCII character, as well-formed UTF-8 bytes.
    int32_t utf8_multibyte();
    // Content of min..max characters (max < 0: unbounded), quotes not included.
    int32_t string_content(int min, int max, bool raw);
    // Numbers v with lo <= v <= hi (no exponent); integers only if `integral`, else at most
    // kMaxFractionDigits digits after the point. The bounds are inclusive and have no more
    // fraction digits than that (decimal_bound.h turns a schema's bounds into these).
    int32_t bounded_number(bool integral, std::optional<Decimal> lo, std::optional<Decimal> hi);

    GrammarBuilder& b;

private:
    int32_t value_ = -1, object_ = -1, array_ = -1, string_ = -1, number_ = -1, integer_ = -1, boolean_ = -1,
            null_ = -1, char_ = -1, raw_char_ = -1, multibyte_ = -1, digits_ = -1;
    std::map<std::string, int32_t> fraction_rules_;  // fraction_digits' rules by their arguments
    Sequence digit();
    int32_t digits_star();
    // The rule for fraction digits (after the point) between two bounds' digits; -1 if none.
    int32_t fraction_digits(const std::optional<std::string>& lo, const std::optional<std::string>& hi, int left,
                            bool need_digit);
};

}  // namespace k3::grammar
