// The daemon's command line parsed as `k3serve serve` would parse it (args[0] is the program),
// for the tests of the settings table and of single settings.
#pragma once
#include <string>
#include <vector>

#include "settings/daemon_config.h"

namespace k3::test {

inline server::DaemonConfig parse_daemon_args(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    bool help = false;
    return server::parse_daemon_config(int(argv.size()), argv.data(), &help);
}

}  // namespace k3::test
