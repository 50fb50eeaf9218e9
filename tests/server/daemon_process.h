// The real `k3serve serve` binary as a child process for tests: starts it on port 0, reads the
// bound port from its log, waits for /health, and stops it with a signal, returning the exit
// status. Also writes the tiny synthetic model (k3serve make-model --preset tiny) once per test.
#pragma once
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace k3::test {

inline std::string env_or_throw(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) throw std::runtime_error(std::string(name) + " is not set (run through ctest)");
    return v;
}

// Writes a synthetic model of `preset` under $K3_TEST_TMP/<name> unless it is there already.
inline std::string make_model(const std::string& name, const std::string& preset = "tiny") {
    std::string dir = env_or_throw("K3_TEST_TMP") + "/" + name;
    if (std::filesystem::exists(dir + "/config.json")) return dir;
    std::filesystem::create_directories(env_or_throw("K3_TEST_TMP"));
    std::string cmd = env_or_throw("K3SERVE_BIN") + " make-model '" + dir + "' --preset " + preset + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("make-model failed: " + cmd);
    return dir;
}

class DaemonProcess {
public:
    explicit DaemonProcess(std::vector<std::string> args, bool wait_ready = true) {
        int out[2];
        if (pipe(out) != 0) throw std::runtime_error("pipe failed");
        std::vector<std::string> argv_s = {env_or_throw("K3SERVE_BIN"), "serve"};
        argv_s.insert(argv_s.end(), args.begin(), args.end());
        pid_ = fork();
        if (pid_ == 0) {
            dup2(out[1], STDERR_FILENO);
            dup2(out[1], STDOUT_FILENO);
            close(out[0]);
            std::vector<char*> argv;
            for (auto& a : argv_s) argv.push_back(a.data());
            argv.push_back(nullptr);
            execv(argv[0], argv.data());
            _exit(127);
        }
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
        std::regex listening(R"(listening on http://[0-9.]+:([0-9]+))");
        for (int i = 0; i < 3000 && port_ == 0; ++i) {
            {
                std::lock_guard lock(mutex_);
                std::smatch m;
                if (std::regex_search(log_, m, listening)) port_ = std::stoi(m[1]);
            }
            if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            if (exited()) break;
        }
        if (!wait_ready) return;  // the caller looks at the exit status and the log
        if (port_ == 0) fail("daemon did not start");
        for (int i = 0; i < 6000; ++i) {
            auto r = client().Get("/health");
            if (r && r->status == 200) return;
            if (exited()) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        fail("daemon did not become ready");
    }
    ~DaemonProcess() { stop_and_join(); }

private:
    [[noreturn]] void fail(const std::string& what) {
        stop_and_join();
        throw std::runtime_error(what + ":\n" + log());
    }
    void stop_and_join() {
        if (status_ < 0 && pid_ > 0) {
            kill(pid_, SIGKILL);
            wait_exit();
        }
        if (reader_.joinable()) reader_.join();
        if (fd_ >= 0) close(fd_);
        fd_ = -1;
    }

public:
    int port() const { return port_; }
    // Waits until `pred` holds (at most ~20 s); returns whether it did.
    template <class Pred>
    static bool eventually(Pred pred, int ms = 20000) {
        for (int waited = 0; waited < ms; waited += 10) {
            if (pred()) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return pred();
    }
    httplib::Client client() const {
        httplib::Client c("127.0.0.1", port_);
        c.set_read_timeout(120, 0);
        return c;
    }
    void signal(int sig) { kill(pid_, sig); }
    // Waits for the exit and returns the exit code (128 + signal if killed).
    int wait_exit() {
        if (status_ >= 0) return status_;
        int st = 0;
        waitpid(pid_, &st, 0);
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return status_;
    }
    bool exited() {
        if (status_ >= 0) return true;
        int st = 0;
        if (waitpid(pid_, &st, WNOHANG) == pid_) {
            status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return true;
        }
        return false;
    }
    std::string log() const {
        std::lock_guard lock(mutex_);
        return log_;
    }

private:
    pid_t pid_ = -1;
    int fd_ = -1;
    int port_ = 0;
    int status_ = -1;
    std::thread reader_;
    mutable std::mutex mutex_;
    std::string log_;
};

}  // namespace k3::test
