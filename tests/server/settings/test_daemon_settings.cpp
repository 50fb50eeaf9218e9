// The table of daemon settings (server/settings/daemon_settings.h) against what is made from it:
// the page operators read (docs/operations.md "Every setting"), `serve --help`, the config file
// (every key /props shows can be read back), and the --no-FLAG switches.
#include <doctest/doctest.h>

#include "common/scratch.h"

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "k3/error.h"
#include "k3/kernel_set_names.h"
#include "daemon_args.h"
#include "settings/daemon_config.h"
#include "settings/daemon_settings.h"

using namespace k3;
using namespace k3::server;
using k3::test::parse_daemon_args;

namespace {

// The markdown table that starts with `header_line` in `page`, up to the first line that is not
// a table row.
std::string table_in(const std::string& page, const std::string& header_line) {
    size_t at = page.find("\n" + header_line + "\n");
    if (at == std::string::npos) return "";
    std::istringstream lines(page.substr(at + 1));
    std::string line, table;
    while (std::getline(lines, line) && !line.empty() && line[0] == '|') table += line + "\n";
    return table;
}

}  // namespace

TEST_CASE("docs/operations.md lists every daemon setting as the settings table has it") {
    const char* src = std::getenv("K3_SOURCE_DIR");
    REQUIRE_MESSAGE(src, "K3_SOURCE_DIR not set");
    const std::string page = k3::test::read_file(std::string(src) + "/docs/operations.md");
    const std::string expected = settings_markdown();
    const std::string header = expected.substr(0, expected.find('\n'));
    // On a difference, paste the expected table into the page's "Every setting" section.
    CHECK_MESSAGE(table_in(page, header) == expected, "docs/operations.md should have:\n" << expected);
}

TEST_CASE("serve --help names every setting with its value, and no flag twice") {
    const std::string help = serve_usage();
    for (const auto& s : daemon_settings()) {
        const std::string entry = "  " + setting_flag(s) + " " + s.value;
        CHECK_MESSAGE(help.find(entry) != std::string::npos, entry);
        CHECK_MESSAGE(help.find(entry, help.find(entry) + 1) == std::string::npos, entry);
        CHECK(find_daemon_setting(s.key) == &s);  // keys are unique
    }
    std::istringstream lines(help);
    for (std::string line; std::getline(lines, line);) CHECK_MESSAGE(line.size() <= 100, line);
}

TEST_CASE("the effective config, read back as a config file, is the same config") {
    unsetenv("K3SERVE_PORT");
    unsetenv("K3SERVE_HOST");
    unsetenv("K3SERVE_API_KEY");
    unsetenv("K3SERVE_MODEL");
    DaemonConfig first = parse_daemon_args({"serve", "/models/m", "--port", "9001", "--queue-depth", "3", "--deadline-s", "12.5",
                                "--allowed-hosts", "a.example,b.example", "--no-lookahead", "--mlock", "false",
                                "--trunk-gb", "2.5", "--log-format", "json", "--prompt-cache-dir", "/var/cache/k3"});
    nlohmann::json shown = first.to_json();
    CHECK(shown["port"] == 9001);
    CHECK(shown["lookahead"] == false);
    CHECK(shown["allowed_hosts"].size() == 2);
    // Every key shown is a config-file key (api_keys is a count, never the keys).
    nlohmann::json file = shown;
    file.erase("api_keys");
    for (const auto& [key, value] : file.items()) CHECK_MESSAGE(find_daemon_setting(key) != nullptr, key);
    DaemonConfig second;
    apply_config_json(second, file, "test");
    CHECK(second.to_json() == shown);
}

TEST_CASE("--no-FLAG turns off a switch and is refused for anything else") {
    DaemonConfig c = parse_daemon_args({"serve", "m", "--no-mlock", "--no-background-load"});
    CHECK_FALSE(c.mlock);
    CHECK_FALSE(c.memory.background_load);
    for (const char* flag : {"--no-port", "--no-web-ui", "--no-bogus"}) {
        try {
            parse_daemon_args({"serve", "m", flag});
            FAIL("accepted: " << flag);
        } catch (const Error& e) {
            CHECK(e.kind() == ErrorKind::Usage);
            CHECK_MESSAGE(std::string(e.what()).find("unknown option") != std::string::npos, e.what());
        }
    }
}

TEST_CASE("--kernels takes every name of the kernel-set table and nothing else") {
    REQUIRE(kernel_set_names().size() >= 2);
    for (const std::string& name : kernel_set_names())
        CHECK(parse_daemon_args({"serve", "m", "--kernels", name}).kernels == name);
    CHECK(parse_daemon_args({"serve", "m"}).kernels.empty());  // the best set this CPU has
    try {
        parse_daemon_args({"serve", "m", "--kernels", "sse9"});
        FAIL("accepted --kernels sse9");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::Usage);
        CHECK_MESSAGE(std::string(e.what()).find(kernel_set_names().back()) != std::string::npos, e.what());
    }
}
