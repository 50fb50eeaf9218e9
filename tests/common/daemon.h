// The real `k3serve serve` binary as a child process for tests: starts it on port 0, reads the
// bound port from its log, waits for /health, and stops it with a signal, returning the exit
// status. The child is killed when the object goes away, so a failing test leaves no daemon.
#pragma once
#include <httplib.h>
#include <sys/types.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace k3::test {

class DaemonProcess {
public:
    // Runs `$K3SERVE_BIN serve args...`. With wait_ready, returns once /health answers 200 and
    // throws (with the daemon's log) if it exits or never gets there; without, returns once the
    // port is known or the process exited, for tests of start-up failures.
    explicit DaemonProcess(std::vector<std::string> args, bool wait_ready = true);
    // Runs `argv` as it is (a launcher such as mpirun that starts `k3serve serve` among other
    // processes) in a process group of its own, which is what signal() and the destructor's
    // kill reach, so no process of the group outlives the test.
    struct Command {
        std::vector<std::string> argv;
    };
    explicit DaemonProcess(Command command, bool wait_ready = true);
    ~DaemonProcess();
    DaemonProcess(const DaemonProcess&) = delete;
    DaemonProcess& operator=(const DaemonProcess&) = delete;

    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    // A client for 127.0.0.1:port with a 120 s read timeout.
    httplib::Client client() const;
    void signal(int sig);
    // Waits for the exit and returns the exit code (128 + signal if killed); the log is whole
    // once this (or exited()) has seen the exit.
    int wait_exit();
    bool exited();
    // Everything the daemon wrote to stdout and stderr so far.
    std::string log() const;

private:
    void start(std::vector<std::string> argv, bool wait_ready);
    [[noreturn]] void fail(const std::string& what);
    void stop_and_join();
    // Records the exit status and waits until the reader has the whole log.
    void note_exit(int wait_status);

    pid_t pid_ = -1;
    bool group_ = false;  // pid_ leads a process group of its own (Command)
    int fd_ = -1;
    int port_ = 0;
    int status_ = -1;
    std::thread reader_;
    mutable std::mutex mutex_;
    std::string log_;
};

}  // namespace k3::test
