#include "common/process.h"

#include <sys/wait.h>

#include <cstdio>

#include "common/scratch.h"

namespace k3::test {

ProcessResult run_command(const std::string& command) {
    ProcessResult r;
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return r;
}

std::string k3serve_bin() { return quoted(env_or("K3SERVE_BIN", "k3serve")); }

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace k3::test
