#include "chat/python_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace k3::chat_json {

std::string python_float(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value < 0 ? "-Infinity" : "Infinity";
    // The shortest round-trip digits in scientific form: d[.ddd]e[+-]X.
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
    std::string sci(buf, end);
    std::string sign;
    if (!sci.empty() && sci[0] == '-') sign = "-", sci.erase(0, 1);
    size_t e = sci.find('e');
    std::string digits = sci.substr(0, e);
    digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
    const int exponent = std::atoi(sci.c_str() + e + 1);
    const int decpt = exponent + 1;  // digits before the decimal point
    // CPython's float_repr_style 'short' with repr's rule: exponent when decpt <= -4 or > 16.
    if (decpt > -4 && decpt <= 16) {
        std::string out;
        if (decpt <= 0) {
            out = "0." + std::string(size_t(-decpt), '0') + digits;
        } else if (size_t(decpt) >= digits.size()) {
            out = digits + std::string(size_t(decpt) - digits.size(), '0') + ".0";
        } else {
            out = digits.substr(0, size_t(decpt)) + "." + digits.substr(size_t(decpt));
        }
        return sign + out;
    }
    std::string mantissa = digits.size() == 1 ? digits : digits.substr(0, 1) + "." + digits.substr(1);
    const int x = decpt - 1;
    std::string exp = std::to_string(x < 0 ? -x : x);
    if (exp.size() < 2) exp = "0" + exp;
    return sign + mantissa + "e" + (x < 0 ? "-" : "+") + exp;
}

namespace {

template <class Json>
void write(const Json& v, Separators sep, std::string& out) {
    const char* item = sep == Separators::Compact ? "," : ", ";
    const char* key = sep == Separators::Compact ? ":" : ": ";
    if (v.is_object()) {
        out += '{';
        bool first = true;
        for (auto it = v.begin(); it != v.end(); ++it) {
            if (!first) out += item;
            first = false;
            out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace);
            out += key;
            write(it.value(), sep, out);
        }
        out += '}';
    } else if (v.is_array()) {
        out += '[';
        for (size_t i = 0; i < v.size(); ++i) {
            if (i) out += item;
            write(v[i], sep, out);
        }
        out += ']';
    } else if (v.is_number_float()) {
        out += python_float(v.template get<double>());
    } else {
        out += v.dump(-1, ' ', false, Json::error_handler_t::replace);
    }
}

}  // namespace

std::string dump(const nlohmann::json& value, Separators separators) {
    std::string out;
    write(value, separators, out);
    return out;
}

std::string dump(const nlohmann::ordered_json& value, Separators separators) {
    std::string out;
    write(value, separators, out);
    return out;
}

}  // namespace k3::chat_json
