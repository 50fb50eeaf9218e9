// `k3serve diskbench` end to end: every row (sequential and random, queue depths 1/4/16,
// O_DIRECT and buffered) is measured and reported; bad input is a usage error.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "io/io_test_util.h"

namespace {

struct Result {
    int code;
    std::string out;
};

Result run(const std::string& args) {
    std::string cmd = std::string(std::getenv("K3SERVE_BIN")) + " diskbench " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    int status = pclose(p);
    return {WEXITSTATUS(status), out};
}

}  // namespace

TEST_CASE("diskbench measures every row on a file") {
    auto dir = k3::test::scratch_dir("diskbench");
    k3::test::write_pattern_file(dir / "data.bin", 24 << 20);
    Result r = run((dir / "data.bin").string() + " --seq-gb 0.02 --random-gb 0.01 --seconds 2 --expert-bytes 100000 --json");
    REQUIRE(r.code == 0);
    auto j = nlohmann::json::parse(r.out.substr(r.out.find('[')));
    REQUIRE(j.size() == 10);
    int random_rows = 0;
    for (const auto& row : j) {
        CHECK(row["bytes"].get<int64_t>() > 0);
        CHECK(row["mb_per_s"].get<double>() > 0);
        if (row["pattern"] == "random") {
            ++random_rows;
            CHECK(row["block_bytes"] == 100000);
        }
    }
    CHECK(random_rows == 6);
    CHECK(j[4]["queue_depth"] == 16);
}

TEST_CASE("diskbench usage") {
    CHECK(run("--help").code == 0);
    Result missing = run("/nonexistent/k3/path");
    CHECK(missing.code == 2);
    CHECK(missing.out.find("/nonexistent/k3/path") != std::string::npos);
    CHECK(run("").code == 2);
}
