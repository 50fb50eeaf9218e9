// One series' value from a daemon's GET /metrics (Prometheus text), for tests that wait on a
// counter or a gauge instead of a timer.
#pragma once
#include <httplib.h>

#include <sstream>
#include <string>

namespace k3::test {

// The value of the series `name` (with its labels, if it has any, as written: name{a="b"}) in
// the client's /metrics; -1 when absent or unreachable.
inline double metric_value(httplib::Client& c, const std::string& name) {
    auto r = c.Get("/metrics");
    if (!r) return -1;
    std::istringstream in(r->body);
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
    return -1;
}

}  // namespace k3::test
