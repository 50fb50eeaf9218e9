// Runs a shell command (the built k3serve binary, from $K3SERVE_BIN) and captures its exit
// status and combined stdout+stderr, for tests of the subcommands.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace k3::test {

struct ProcessResult {
    int exit_code = -1;
    std::string output;
};

inline ProcessResult run_command(const std::string& command) {
    ProcessResult r;
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return r;
}

// "$K3SERVE_BIN" quoted for the shell.
inline std::string k3serve_bin() {
    const char* bin = std::getenv("K3SERVE_BIN");
    return std::string("'") + (bin ? bin : "k3serve") + "'";
}

inline std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace k3::test
