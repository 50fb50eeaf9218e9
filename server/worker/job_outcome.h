// What became of a job, in the server's own terms. The worker reports these; it never picks an
// HTTP status or an API's error strings. The API layer (wire/error.cpp) maps each failure to
// its status and body, and metrics count them as RequestOutcome.
#pragma once
#include <string>

namespace k3::server {

// Why a choice finished normally.
enum class FinishReason {
    Stop,       // end of turn, EOS or a stop string/token
    Length,     // max_tokens reached, or the context filled up while generating
    ToolCalls,  // the turn ended after the model called one or more tools
};

// Why a job ended without finishing.
enum class FailureKind {
    Cancelled,      // the client left or could not keep up with the stream
    ShuttingDown,   // the daemon is draining and cancelled the job
    Deadline,       // the job outlived its deadline (--deadline-s)
    ContextFull,    // the prompt does not fit the session's context
    InvalidPrompt,  // the engine refused the prompt's tokens
    EngineFailed,   // the engine failed (a read error, an internal check)
    ModelUnavailable,  // a part of the model on another machine is gone (expert parallelism)
    Internal,       // an unexpected exception in the worker
};

struct JobFailure {
    FailureKind kind = FailureKind::Internal;
    std::string message;  // for the client and the log
};

}  // namespace k3::server
