// A JSON POST to a daemon under test that must answer `expect`: the body (shown when it does
// not) parsed.
#pragma once
#include <doctest/doctest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

namespace k3::test {

inline nlohmann::json post(httplib::Client& c, const std::string& path, const nlohmann::json& body, int expect = 200) {
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == expect);
    return nlohmann::json::parse(r->body);
}

}  // namespace k3::test
