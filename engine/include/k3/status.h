// k3::Status and k3::CancelFlag: how the engine reports an expected per-request failure and how
// a caller asks a running evaluation to stop. Their own header so that the engine's internals
// (stores, files, the forward pass) can speak them without including the whole facade.
#pragma once
#include <atomic>
#include <string>

namespace k3 {

// Expected per-request failures are returned, not thrown.
enum class StatusCode {
    Ok,
    Cancelled,         // the cancel flag was set; the session is left at a consistent prefix
    ContextFull,       // the sequence would exceed the session's context
    InvalidArgument,   // bad token id, empty prompt, ...
    IoError,           // a weight read failed or came back short: no token was produced from it
    Unavailable,       // a rank of expert parallelism is gone (dead, hung, cannot read its experts): no
                       // answer until the job is restarted (docs/operations.md "Several machines")
    Internal,
};

struct Status {
    StatusCode code = StatusCode::Ok;
    std::string message;
    bool ok() const { return code == StatusCode::Ok; }
    static Status Ok() { return {}; }
};

// Set by another thread (the HTTP side, a signal handler); read between layers.
using CancelFlag = std::atomic<bool>;

}  // namespace k3
