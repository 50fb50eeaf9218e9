// Named SSE frames ("event: NAME\ndata: JSON\n\n"), as the Messages and Responses APIs stream
// them, parsed in order for tests; a frame without a name or data fails the test.
#pragma once
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace k3::test {

struct SseFrame {
    std::string event;
    nlohmann::json data;
};

inline std::vector<SseFrame> sse_frames(const std::string& sse) {
    std::vector<SseFrame> out;
    size_t pos = 0;
    while (pos < sse.size()) {
        size_t end = sse.find("\n\n", pos);
        REQUIRE(end != std::string::npos);
        std::string block = sse.substr(pos, end - pos);
        pos = end + 2;
        REQUIRE(block.rfind("event: ", 0) == 0);
        size_t nl = block.find('\n');
        REQUIRE(block.compare(nl + 1, 6, "data: ") == 0);
        out.push_back({block.substr(7, nl - 7), nlohmann::json::parse(block.substr(nl + 7))});
    }
    return out;
}

inline std::vector<std::string> sse_event_names(const std::vector<SseFrame>& frames) {
    std::vector<std::string> out;
    for (const auto& f : frames) out.push_back(f.event);
    return out;
}

}  // namespace k3::test
