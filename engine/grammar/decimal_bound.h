// A JSON schema's numeric bound (minimum, maximum, exclusiveMinimum, exclusiveMaximum) as an
// inclusive decimal bound on what the grammar writes, such that every number written satisfies
// the original bound however a validator reads the two: as IEEE doubles (JavaScript's ajv: text
// parsed to the nearest double), exactly (Python's jsonschema: integers of any size, compared
// with a float bound by its exact value) or as decimals written (0.1 as 0.1). Rounding to
// nearest is monotonic, so a written decimal d >= L gives double(d) >= double(L); an inclusive
// bound is therefore the tightest of the readings of the schema's value, and an exclusive bound
// B the double next to double(B) (strictly inside B under every reading). Fractional bounds
// (0.5, 9.75) and integers beyond 2^53 are handled alike; the result is rounded inwards to what
// the grammar writes: integers, or at most kMaxFractionDigits digits after the point.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace k3::grammar {

// A decimal number: sign, integer digits without leading zeros ("0" for zero) and fraction
// digits without trailing zeros. Zero is never negative.
struct Decimal {
    bool negative = false;
    std::string integer = "0";
    std::string fraction;
};

// Digits a bounded number may write after the point (the grammar's cap on a run of digits).
inline constexpr int kMaxFractionDigits = 18;

// The exact value of a finite double as a Decimal.
Decimal exact_decimal(double v);
// "-12.50" -> {true, "12", "5"}; "1e+20" -> {false, "100000000000000000000", ""}. `text` is a
// JSON number (an optional '+' too).
Decimal parse_decimal(const std::string& text);
// <0, 0, >0 as a < b, a == b, a > b.
int compare(const Decimal& a, const Decimal& b);
Decimal negated(const Decimal& d);
// The least (round_up) or greatest (round_down) decimal with at most `digits` fraction digits
// that is >= d (round_up) or <= d (round_down).
Decimal round_up(const Decimal& d, int digits);
Decimal round_down(const Decimal& d, int digits);
// Natural-number text plus or minus one ("99" -> "100"; "100" -> "99"; `n` > 0 for minus).
std::string plus_one(const std::string& n);
std::string minus_one(const std::string& n);

// The inclusive bound the grammar uses for a schema value `v` (a finite JSON number), as a lower
// bound (minimum, exclusiveMinimum) or an upper one, rounded inwards to `fraction_digits`
// (0 for integers).
Decimal lower_bound(const nlohmann::ordered_json& v, bool exclusive, int fraction_digits);
Decimal upper_bound(const nlohmann::ordered_json& v, bool exclusive, int fraction_digits);

}  // namespace k3::grammar
