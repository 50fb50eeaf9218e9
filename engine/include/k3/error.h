// k3::Error: the one exception type for start-up, load, config and I/O failures. It carries a
// kind so that main() can map it to the exit-code contract (README, "Exit codes") without
// parsing messages. Never thrown inside forward() or kernels: there, failures are a Status.
#pragma once
#include <stdexcept>
#include <string>

namespace k3 {

enum class ErrorKind {
    Usage,       // bad command line or request               -> exit 2
    Config,      // config.json cannot be read with confidence -> exit 2
    Checkpoint,  // shard/tensor missing, truncated, malformed -> exit 2
    Io,          // read/open failure at run time              -> exit 1
    Memory,      // memory plan refused or allocation failed   -> exit 1
    Runtime,     // anything else at run time                  -> exit 1
};

class Error : public std::runtime_error {
public:
    Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
    ErrorKind kind() const { return kind_; }

private:
    ErrorKind kind_;
};

// Exit code 3, one meaning: this machine lacks what the task needs (doctor: it cannot run the
// model; download: the destination has too little free disk). Nothing was changed.
constexpr int kExitMachineLacks = 3;

// The exit code a subcommand returns for an error of this kind.
inline int exit_code_for(ErrorKind kind) {
    switch (kind) {
        case ErrorKind::Usage:
        case ErrorKind::Config:
        case ErrorKind::Checkpoint: return 2;
        default: return 1;
    }
}

}  // namespace k3
