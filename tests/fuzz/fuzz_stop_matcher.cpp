// Stop strings across pieces (server/worker/stop_matcher.h): the first input byte gives the number
// of stop strings, then stops and text pieces separated by 0xff. Without a stop, everything
// comes out exactly once; with one, what came out is the text before the earliest stop.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "worker/stop_matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    size_t n_stops = data[0] % 5;
    std::vector<std::string> parts;
    std::string all(reinterpret_cast<const char*>(data + 1), size - 1);
    size_t pos = 0;
    while (pos <= all.size()) {
        size_t end = all.find('\xff', pos);
        if (end == std::string::npos) end = all.size();
        parts.push_back(all.substr(pos, end - pos));
        pos = end + 1;
    }
    std::vector<std::string> stops;
    size_t i = 0;
    for (; i < parts.size() && stops.size() < n_stops; ++i)
        if (!parts[i].empty()) stops.push_back(parts[i]);
    k3::server::StopMatcher matcher(stops);
    std::string text, out;
    for (; i < parts.size() && !matcher.stopped(); ++i) {
        text += parts[i];
        out += matcher.push(parts[i]);
    }
    if (!matcher.stopped()) {
        out += matcher.flush();
        bool contains_stop = false;
        for (const auto& s : stops) contains_stop |= text.find(s) != std::string::npos;
        K3_FUZZ_CHECK(!contains_stop, "a stop string in the text did not stop");
        K3_FUZZ_CHECK(out == text, "text lost or repeated without a stop");
    } else {
        size_t first = std::string::npos;
        for (const auto& s : stops) first = std::min(first, text.find(s));
        K3_FUZZ_CHECK(first != std::string::npos, "stopped without a stop string");
        K3_FUZZ_CHECK(out == text.substr(0, first), "output is not the text before the first stop");
    }
    return 0;
}
