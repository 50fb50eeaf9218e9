#include "http/sse.h"

namespace k3::server::sse {

std::string data(std::string_view payload) {
    std::string out = "data: ";
    out += payload;
    out += "\n\n";
    return out;
}

std::string event(std::string_view name, std::string_view payload) {
    std::string out = "event: ";
    out += name;
    out += "\n";
    out += data(payload);
    return out;
}

std::string done() { return "data: [DONE]\n\n"; }

}  // namespace k3::server::sse
