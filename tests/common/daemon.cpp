#include "common/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <stdexcept>

#include "common/scratch.h"
#include "common/wait.h"

namespace k3::test {

DaemonProcess::DaemonProcess(std::vector<std::string> args, bool wait_ready) {
    std::vector<std::string> argv_s = {env_or_throw("K3SERVE_BIN"), "serve"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    start(std::move(argv_s), wait_ready);
}

DaemonProcess::DaemonProcess(Command command, bool wait_ready) {
    group_ = true;
    start(std::move(command.argv), wait_ready);
}

void DaemonProcess::start(std::vector<std::string> argv_s, bool wait_ready) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ == 0) {
        if (group_) setpgid(0, 0);
        dup2(out[1], STDERR_FILENO);
        dup2(out[1], STDOUT_FILENO);
        std::vector<char*> argv;
        for (auto& a : argv_s) argv.push_back(a.data());
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());
        _exit(127);
    }
    if (group_) setpgid(pid_, pid_);  // also here: a kill may come before the child runs
    close(out[1]);
    fd_ = out[0];
    reader_ = std::thread([this] {
        char buf[4096];
        ssize_t n;
        while ((n = read(fd_, buf, sizeof buf)) > 0) {
            std::lock_guard lock(mutex_);
            log_.append(buf, size_t(n));
        }
    });
    const std::regex listening(R"(listening on http://[0-9.]+:([0-9]+))");
    eventually(
        [&] {
            std::lock_guard lock(mutex_);
            std::smatch m;
            if (std::regex_search(log_, m, listening)) port_ = std::stoi(m[1]);
            return port_ != 0 || exited();
        },
        std::chrono::seconds(60));
    if (!wait_ready) return;  // the caller looks at the exit status and the log
    if (port_ == 0) fail("daemon did not start");
    const bool ready = eventually(
        [&] {
            auto r = client().Get("/health");
            return (r && r->status == 200) || exited();
        },
        std::chrono::seconds(60));
    if (!ready || exited()) fail("daemon did not become ready");
    // /health answers once the daemon is ready, but its log reaches log_ through a pipe and a
    // reader thread, which on a busy machine can lag: wait for the daemon's own "ready:" line,
    // so a test that reads the start-up lines (kernels, memory plan) sees all of them.
    eventually(
        [&] {
            std::lock_guard lock(mutex_);
            return log_.find("ready: serving") != std::string::npos;
        },
        std::chrono::seconds(30));
}

DaemonProcess::~DaemonProcess() { stop_and_join(); }

void DaemonProcess::fail(const std::string& what) {
    stop_and_join();
    throw std::runtime_error(what + ":\n" + log());
}

void DaemonProcess::stop_and_join() {
    if (status_ < 0 && pid_ > 0) {
        kill(group_ ? -pid_ : pid_, SIGKILL);
        wait_exit();
    }
    if (group_ && pid_ > 0) kill(-pid_, SIGKILL);  // what the launcher left behind
    if (reader_.joinable()) reader_.join();
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
}

httplib::Client DaemonProcess::client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    return c;
}

void DaemonProcess::signal(int sig) { kill(pid_, sig); }

int DaemonProcess::wait_exit() {
    if (status_ >= 0) return status_;
    int st = 0;
    waitpid(pid_, &st, 0);
    note_exit(st);
    return status_;
}

void DaemonProcess::note_exit(int wait_status) {
    status_ = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
    // The child held the pipe's only write end, so the reader reaches its end now: wait for it,
    // or a test that reads the log right after the exit can miss the daemon's last lines (its
    // "shut down cleanly" was still in the pipe once in a dozen runs at load 12).
    if (reader_.joinable()) reader_.join();
}

bool DaemonProcess::exited() {
    if (status_ >= 0) return true;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
        note_exit(st);
        return true;
    }
    return false;
}

std::string DaemonProcess::log() const {
    std::lock_guard lock(mutex_);
    return log_;
}

}  // namespace k3::test
