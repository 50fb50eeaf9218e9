// A daemon's JSON routes as tests read them: a route's body (it must answer 200), and the one
// running request of GET /v1/status (docs/web-ui.md, "Engine figures"), for tests that wait on
// the daemon's state.
#pragma once
#include <doctest/doctest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

namespace k3::test {

inline nlohmann::json get_json(httplib::Client& c, const char* path) {
    auto r = c.Get(path);
    REQUIRE(r);
    REQUIRE(r->status == 200);
    return nlohmann::json::parse(r->body);
}

// /v1/status's first running request; null when none runs.
inline nlohmann::json running_request(httplib::Client& c) {
    const nlohmann::json s = get_json(c, "/v1/status");
    return s["active"].empty() ? nlohmann::json(nullptr) : s["active"][0];
}

}  // namespace k3::test
