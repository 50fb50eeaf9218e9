// Expert parallelism over MPI (docs/operations.md "Several machines", docs/architecture.md
// "Expert parallelism"): an `mpirun` job of n ranks serves one model; rank 0 is the daemon (or
// `k3serve run`) and computes everything but the other ranks' routed experts; rank r owns the
// share store/expert_share.h gives it, reads only those from its own disk into its own store and
// computes them for the rows rank 0 sends it, one message pair per rank and MoE layer.
//
// Faults: every wait has a deadline and rank 0 pings the others every second; a rank that dies,
// hangs or cannot read its experts fails the model for good (a log line naming the rank, every
// later step an IoError naming it) until the job is restarted. Built without MPI (K3_HAVE_MPI
// unset) the same functions exist and refuse with a usage error.
#pragma once
#include <memory>
#include <string>

#include "model/model.h"
#include "model/remote_experts.h"
#include "store/expert_share.h"

namespace k3::parallel {

// The job this process was started in, from the launcher's environment (Open MPI's
// OMPI_COMM_WORLD_RANK/SIZE, else PMI_RANK/PMI_SIZE); {0, 1} when not started by mpirun. No MPI
// call: a process outside a job never initialises MPI.
ExpertShare launched_world();

bool built_with_mpi();

// Deadlines (seconds): an exchange of one layer, a heartbeat's answer, the other ranks' load.
// K3_RANK_TIMEOUT_S, K3_RANK_HEARTBEAT_S and K3_RANK_LOAD_TIMEOUT_S override them (tests).
struct Deadlines {
    double exchange = 120;
    double heartbeat = 5;
    double load = 3600;
    static Deadlines from_environment();
};

// Rank 0's side: the other ranks' experts (model/remote_experts.h), their health, the job's end.
class ExpertLeader : public RemoteExperts {
public:
    // The job's ranks (their experts' share of n_experts) and its health. "" while every rank
    // answers; else why the model is unavailable (the rank, its host and what happened).
    virtual int ranks() const = 0;
    virtual std::string failure() const = 0;
    // Tells the other ranks the chunk size and waits until each has loaded its share (or
    // failed: a k3::Error naming the rank); then the heartbeat starts.
    virtual void start_serving(int chunk_tokens) = 0;

    // What the exchanges cost so far (the engine's expert_exchange* counters).
    struct Traffic {
        uint64_t exchanges = 0, bytes = 0;
        double seconds = 0, wait_seconds = 0;
    };
    virtual Traffic traffic() const = 0;
};

// Initialises MPI as rank 0 of `world` and checks that every other rank opened a checkpoint with
// the same `fingerprint` (throws k3::Error(Checkpoint) naming the rank that differs, and
// k3::Error(Io) for a rank that does not answer or failed to open its checkpoint; the other
// ranks are told to stop either way).
std::unique_ptr<ExpertLeader> connect_leader(ExpertShare world, const std::string& fingerprint, int n_experts);

// A rank other than 0: sends rank 0 its checkpoint's fingerprint (or the error that kept it from
// opening one: `opened` false, `fingerprint` the message) and returns the chunk size rank 0 will
// send rows for; throws k3::Error when rank 0 refuses (another checkpoint) or ends the job.
class ExpertFollower {
public:
    virtual ~ExpertFollower() = default;
    virtual int hello(bool opened, const std::string& fingerprint_or_error) = 0;
    // After hello: this rank's store and model are ready (`error` empty) or could not be made.
    virtual void ready(const std::string& error) = 0;
    // Serves rank 0's layers with `m` (its share's experts) until rank 0 ends the job (true) or
    // stops answering (false, logged).
    virtual bool serve(Model& m) = 0;
};
std::unique_ptr<ExpertFollower> connect_follower(ExpertShare world);

}  // namespace k3::parallel
