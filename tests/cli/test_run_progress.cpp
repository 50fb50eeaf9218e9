// `k3serve run`'s prompt progress line: on a terminal (a pseudo-terminal here) stderr gets the
// line, redrawn in place, ending with the prompt's summary; through a pipe nothing of it appears,
// and the ids are those of the plain run either way.
#include <doctest/doctest.h>

#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "cli/prefill_line.h"
#include "common/model_cache.h"
#include "common/process.h"
#include "common/scratch.h"

using namespace k3::test;

namespace {

// Runs argv with stdin, stdout and stderr on a new pseudo-terminal; returns everything written.
std::string run_on_terminal(const std::vector<std::string>& argv, int* exit_code) {
    int master = -1;
    const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
    REQUIRE(pid >= 0);
    if (pid == 0) {
        std::vector<char*> args;
        for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execv(args[0], args.data());
        _exit(127);
    }
    std::string out;
    char buf[4096];
    for (;;) {
        const ssize_t n = read(master, buf, sizeof buf);
        if (n > 0) {
            out.append(buf, size_t(n));
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            break;  // EIO: the child closed the terminal's last descriptor
        }
    }
    close(master);
    int status = 0;
    waitpid(pid, &status, 0);
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return out;
}

std::string ids_of(const std::string& out) {
    const size_t at = out.find("generated ids:");
    // (a terminal ends lines with \r\n)
    return at == std::string::npos ? "" : out.substr(at, out.find_first_of("\r\n", at) - at);
}

}  // namespace

TEST_CASE("k3serve run: a prompt progress line on a terminal's stderr, none through a pipe") {
    const std::string model = cached_model("tiny");
    std::string ids;
    for (int i = 0; i < 600; ++i) {
        if (i > 0) ids += ',';  // (a char, not ",": GCC bug 105329, docs/development.md)
        ids += std::to_string(1 + (i * 37) % 500);
    }
    // --prefill-mb 0.25: many chunks of a few dozen tokens
    const std::vector<std::string> argv = {env_or_throw("K3SERVE_BIN"), "run", model, "--ids", ids, "--gen", "2",
                                           "--threads", "1", "--prefill-mb", "0.25"};
    int code = -1;
    const std::string tty = run_on_terminal(argv, &code);
    INFO(tty.substr(0, 2000));
    REQUIRE(code == 0);
    CHECK(tty.find("\rprompt read: 600 tokens in ") != std::string::npos);
    // redrawn in place on the way
    CHECK(tty.find(" of 600 tokens (") != std::string::npos);

    std::string command = quoted(env_or_throw("K3SERVE_BIN"));
    for (size_t i = 1; i < argv.size(); ++i) {
        command += ' ';
        command += quoted(argv[i]);
    }
    const ProcessResult piped = run_command(command);
    REQUIRE(piped.exit_code == 0);
    CHECK(piped.output.find("reading the prompt") == std::string::npos);
    CHECK(piped.output.find("prompt read") == std::string::npos);
    CHECK_FALSE(ids_of(piped.output).empty());
    CHECK(ids_of(piped.output) == ids_of(tty));
}

TEST_CASE("k3serve run: the progress line's text") {
    k3::PrefillFigures f;
    f.total_tokens = 5000;
    f.done_tokens = 1200;
    f.tokens_per_s = 35.2;
    f.eta_s = 107.0;
    CHECK(k3::cli::PrefillLine::text(f, false) == "reading the prompt: 1,200 of 5,000 tokens (24%), 35.2 tokens/s, about 1 min 47 s left");
    // inside a pass: which one, its tokens and the layers it has been through
    f.pass = k3::PassFigures{2, 1800, 30, 61};
    CHECK(k3::cli::PrefillLine::text(f, false) ==
          "reading the prompt: 1,200 of 5,000 tokens (24%), pass 2 (1,800 tokens): 30 of 61 layers, 35.2 tokens/s, about 1 min 47 s left");
    f.pass.reset();
    f.done_tokens = 5000;
    f.cached_tokens = 1000;
    f.elapsed_s = 113.6;
    f.tokens_per_s = 35.2;
    f.eta_s = 0.0;
    CHECK(k3::cli::PrefillLine::text(f, true) == "prompt read: 5,000 tokens (1,000 cached) in 1 min 54 s, 35.2 tokens/s");
    f.chunks_done = 3;
    CHECK(k3::cli::PrefillLine::text(f, true) == "prompt read: 5,000 tokens (1,000 cached) in 1 min 54 s, 3 passes, 35.2 tokens/s");
}
