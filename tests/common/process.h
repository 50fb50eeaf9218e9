// Running the built k3serve ($K3SERVE_BIN) as a shell command, capturing exit code and output,
// for tests of the subcommands.
#pragma once
#include <string>

namespace k3::test {

struct ProcessResult {
    int exit_code = -1;
    std::string output;  // stdout and stderr, interleaved
};

// Runs `command` with /bin/sh; exit_code is 128 + signal when the command was killed.
ProcessResult run_command(const std::string& command);
// "$K3SERVE_BIN" quoted for the shell.
std::string k3serve_bin();
// `s` in single quotes for the shell (s must not contain a single quote).
std::string quoted(const std::string& s);

}  // namespace k3::test
