#include "k3/xtml.h"

namespace k3::xtml {

// Only & and " (k3/xtml.h): the official encoder leaves < and > as they are.
std::string escape_attribute(std::string_view value) {
    std::string out;
    out.reserve(value.size());
    for (char c : value) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

std::string unescape_attribute(std::string_view value) {
    static constexpr std::pair<std::string_view, char> kEntities[] = {{"&amp;", '&'}, {"&quot;", '"'}};
    std::string out;
    out.reserve(value.size());
    for (size_t i = 0; i < value.size();) {
        bool replaced = false;
        for (auto [entity, c] : kEntities) {
            if (value.substr(i, entity.size()) == entity) {
                out += c;
                i += entity.size();
                replaced = true;
                break;
            }
        }
        if (!replaced) out += value[i++];
    }
    return out;
}

}  // namespace k3::xtml
