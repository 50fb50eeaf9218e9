// `k3serve run ARGS` as a child process: its exit code and what it printed (stdout, and stderr
// too when asked).
#pragma once
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "common/scratch.h"

namespace k3::test {

struct RunResult {
    int code;
    std::string out;
};

inline RunResult run_k3serve(const std::string& args, bool with_stderr = false) {
    const std::string cmd = env_or("K3SERVE_BIN", "k3serve") + " run " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p);
    std::string out;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    const int status = pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace k3::test
