// What rank 0 and the other ranks say to each other (expert_parallel.h), and the one way either
// waits: polling nonblocking requests against a deadline, never a blocking MPI call, so that a
// rank that died or hangs costs a timeout and not a hang.
//
// Per MoE layer and rank that owns some of the pass's experts, rank 0 sends kWork (ints: layer,
// tokens in the pass, n experts, then the n expert ids and the n row counts), kRowTokens (ints:
// each row's token, rows in expert order) and kLatent (the pass's latent inputs, floats
// [tokens][width]); the rank answers kDone (a status text: empty = ok) and, when ok, kOut (the
// rows' outputs, in the same order). kPing / kPong is the heartbeat; kStop ends the job.
// At start each rank sends kHello (its host, then its checkpoint fingerprint or why it has none)
// and gets kAccept (ints: accepted, chunk tokens), then sends kReady (empty or its load error).
#pragma once
#ifdef K3_HAVE_MPI
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace k3::parallel {

enum Tag : int { kHello = 1, kAccept, kReady, kWork, kRowTokens, kLatent, kDone, kOut, kPing, kPong, kStop };

inline constexpr int kStatusBytes = 512;  // kDone, kHello and kReady texts, zero-terminated

// MPI_Init_thread (MPI_THREAD_MULTIPLE: rank 0's heartbeat and the engine thread each talk)
// once per process, errors returned rather than fatal. Throws k3::Error when MPI cannot start.
void init_mpi();
std::string processor_name();

using Clock = std::chrono::steady_clock;

// Polls `requests` until all complete (true) or `deadline` passes or *abort becomes true (false;
// the requests are left pending). Spins first, then sleeps a little longer each round, up to 1 ms:
// an answer is taken within microseconds, an idle wait costs no core.
bool wait_all(std::vector<MPI_Request>& requests, Clock::time_point deadline, const std::atomic<bool>* abort = nullptr);

// Drops pending requests: receives cancelled, sends let go (their peer is being given up on).
void abandon(std::vector<MPI_Request>& requests);

// A text of at most kStatusBytes - 1 bytes, zero-padded to kStatusBytes.
std::vector<char> status_text(const std::string& s);

}  // namespace k3::parallel
#endif
